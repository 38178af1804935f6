-- Retries a failed or cancelled job by hand (the caller locked it and
-- checked its state): it becomes waiting (pending, blocked again, when it
-- has dependencies), due now, with its retries
-- counted afresh, and its event names the state it left. Its attempts go
-- on counting; its last error stays until its next attempt is claimed
-- (claim_mark.sql). $1: id; $2: group; $3: the state it leaves.
WITH upd AS (
    UPDATE fairway_job
       SET state = CASE WHEN depends_on IS NULL THEN 'waiting' ELSE 'pending' END, run_at = now(), retries = 0, finished = NULL, progress = 0,
           cancel_requested = false, worker = NULL, lease_until = NULL, trigger_after = NULL
     WHERE group_name = $2 AND id = $1 RETURNING id, task, group_name, attempt, state)
INSERT INTO fairway_event (job_id, task, group_name, state, prev_state, attempt)
SELECT id, task, group_name, state, $3, attempt FROM upd
