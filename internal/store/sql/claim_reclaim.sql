-- Hands out again the still-scheduled jobs of claim $2 by executor $1
-- (instance $4), with a fresh lease of $3, never past their hand-over + $5
-- (store.MaxHold, as extend_leases.sql).
UPDATE fairway_job SET lease_until = LEAST(now() + $3::interval, coalesce(scheduled_at + $5::interval, now() + $3::interval))
WHERE worker = $1 AND claim_id = $2 AND state = 'scheduled' AND worker_instance = $4
RETURNING {{job_columns}}
