-- How many jobs executor $1's instance $2 holds (scheduled or running),
-- when ClaimParams.MaxHeld caps them. A statement of its own, after
-- claim_lock.sql: its snapshot is taken once the fairness lock is held, so
-- it sees every claim committed before (claim_lock's own snapshot is taken
-- before it waits for the lock).
SELECT count(*) FROM fairway_job WHERE worker = $1 AND worker_instance = $2 AND state IN ('scheduled', 'running')
