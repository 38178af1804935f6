-- Releases pending jobs whose trigger_after has come: pending → waiting,
-- due now, with their events. $1: at most this many.
WITH due AS (
    SELECT group_name, id FROM fairway_job WHERE state = 'pending' AND trigger_after <= now()
     ORDER BY trigger_after LIMIT $1 FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE fairway_job j SET state = 'waiting', run_at = now(), trigger_after = NULL
      FROM due WHERE j.group_name = due.group_name AND j.id = due.id
    RETURNING j.id, j.task, j.group_name, j.attempt, j.run_at
), ev AS (
    INSERT INTO fairway_event (job_id, task, group_name, state, prev_state, attempt)
    SELECT id, task, group_name, 'waiting', 'pending', attempt FROM upd
)
SELECT group_name, id, 'waiting', run_at FROM upd
