-- Jobs whose lease ran out and whose executor is silent (no heartbeat for
-- $2, or the lease is older than $3), oldest lease first, at most $1, locked.
SELECT j.group_name, j.id, j.attempt, j.worker, j.worker_instance FROM fairway_job j
LEFT JOIN fairway_executor e ON e.app_id = j.worker
WHERE j.state IN ('scheduled', 'running') AND j.lease_until < now()
  AND (e.last_heartbeat IS NULL OR e.last_heartbeat < now() - $2::interval OR j.lease_until < now() - $3::interval)
ORDER BY j.lease_until LIMIT $1 FOR UPDATE OF j SKIP LOCKED
