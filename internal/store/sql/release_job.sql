-- Releases a pending job by hand (the caller locked it and checked it is
-- pending): pending → waiting, due now, with its event. $1: id; $2: group.
WITH upd AS (
    UPDATE fairway_job SET state = 'waiting', run_at = now(), trigger_after = NULL
     WHERE group_name = $2 AND id = $1 RETURNING id, task, group_name, attempt)
INSERT INTO fairway_event (job_id, task, group_name, state, prev_state, attempt)
SELECT id, task, group_name, 'waiting', 'pending', attempt FROM upd
