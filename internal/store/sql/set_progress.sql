-- Sets the progress of attempts (arrays: ids, attempts, workers, progress,
-- groups, instances) that the named instance still holds; by primary key.
-- Returns what changed, for subscribers: group, id, task, attempt,
-- progress, started.
WITH p AS (
    SELECT j.group_name, j.id, p.progress
      FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::text[], $6::text[]) AS p (id, attempt, worker, progress, group_name, instance)
     CROSS JOIN LATERAL (SELECT j.* FROM fairway_job j WHERE j.group_name = p.group_name AND j.id = p.id LIMIT 1 FOR UPDATE) j
     WHERE j.attempt = p.attempt AND j.worker = p.worker AND j.worker_instance = p.instance AND j.state IN ('scheduled', 'running')
)
UPDATE fairway_job j SET progress = p.progress FROM p WHERE j.group_name = p.group_name AND j.id = p.id
RETURNING j.group_name, j.id, j.task, j.attempt, j.progress, j.started
