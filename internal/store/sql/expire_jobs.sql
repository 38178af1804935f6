-- Fails jobs not started yet (pending, waiting, stuck) whose expires_at has
-- passed, with their events. $1: at most this many; $2: the error text.
WITH due AS (
    SELECT group_name, id, state FROM fairway_job
     WHERE expires_at <= now() AND expires_at IS NOT NULL AND state IN ('pending', 'waiting', 'stuck')
     ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE fairway_job j SET state = 'failed', error = $2, finished = now(), trigger_after = NULL
      FROM due WHERE j.group_name = due.group_name AND j.id = due.id
    RETURNING j.id, j.task, j.group_name, j.attempt, j.run_at, due.state AS prev_state
), ev AS (
    INSERT INTO fairway_event (job_id, task, group_name, state, prev_state, attempt, error)
    SELECT id, task, group_name, 'failed', prev_state, attempt, $2 FROM upd
)
SELECT group_name, id, 'failed', run_at FROM upd
