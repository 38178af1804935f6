-- Renews the leases of executor $1 (instance $4) on jobs ($5 groups, $2
-- ids) it still holds, to now() + $3, within what the coordinators allow
-- whatever the executor heartbeats (its lease then runs out, and the job
-- is released as lost, its attempt counted):
--   a running job, never past its start + its timeout + 2 × $3 (room for
--   the executor's own timeout grace, 5 s by default); without a timeout,
--   $7 (the longest timeout a job may have) stands for it;
--   a job handed over and not started, never past its hand-over + $6.
UPDATE fairway_job j SET lease_until = CASE
         WHEN j.state = 'running' AND j.started IS NOT NULL
         THEN LEAST(now() + $3::interval,
                    j.started + coalesce(j.timeout_ms * interval '1 millisecond', $7::interval) + 2 * $3::interval)
         WHEN j.state = 'scheduled' AND j.scheduled_at IS NOT NULL
         THEN LEAST(now() + $3::interval, j.scheduled_at + $6::interval)
         ELSE now() + $3::interval END
 FROM unnest($5::text[], $2::text[]) AS h (group_name, id)
WHERE j.group_name = h.group_name AND j.id = h.id
  AND j.worker = $1 AND j.worker_instance = $4 AND j.state IN ('scheduled', 'running')
