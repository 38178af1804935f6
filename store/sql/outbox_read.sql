-- The oldest $1 outbox events.
SELECT id, job_id, task, group_name, state, prev_state, attempt, error, code, field, worker, periodic, time
FROM fairway_event ORDER BY id LIMIT $1
