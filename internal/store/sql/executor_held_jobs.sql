-- The jobs executor $1 holds, locked (its restart releases them all).
SELECT group_name, id, attempt, worker, worker_instance FROM fairway_job
WHERE state IN ('scheduled', 'running') AND worker = $1 FOR UPDATE
