-- Cancels a job no executor holds (the caller locked it and read its
-- state, $2), with its event. $1: id; $3: group.
WITH upd AS (
    UPDATE fairway_job SET state = 'cancelled', cancel_requested = true, finished = now()
     WHERE group_name = $3 AND id = $1 RETURNING id, task, group_name, attempt)
INSERT INTO fairway_event (job_id, task, group_name, state, prev_state, attempt)
SELECT id, task, group_name, 'cancelled', $2, attempt FROM upd
