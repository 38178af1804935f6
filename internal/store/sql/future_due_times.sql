-- The next $1 distinct future times at which waiting or stuck jobs
-- become due.
SELECT DISTINCT run_at FROM fairway_job
WHERE state IN ('waiting', 'stuck') AND run_at > now() ORDER BY run_at LIMIT $1
