-- The job of periodic task $1 (tracker) in group $2 not yet final, if any.
SELECT id FROM fairway_job WHERE group_name = $2 AND tracker = $1 AND state NOT IN ('success', 'failed', 'cancelled')
