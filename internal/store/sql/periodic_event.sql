-- The event of a periodic task's due time: 'fired' (the job is the one it
-- submitted) or 'skipped' (the job is its previous one, not ended yet).
-- $1: job id; $2: task; $3: group; $4: 'fired' or 'skipped'; $5: the
-- periodic task; $6: the reason of a skip, or NULL (none).
INSERT INTO fairway_event (job_id, task, group_name, state, periodic, error)
VALUES ($1, $2, $3, $4, $5, coalesce($6, ''))
