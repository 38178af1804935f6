-- Renews the leases of executor $1 (instance $4) on jobs ($5 groups, $2
-- ids) it still holds, to now() + $3; a running job with a timeout never
-- past its start + timeout + 2 × $3 (room for the executor's own
-- timeout grace, 5 s by default): the coordinators enforce the timeout
-- whatever the executor heartbeats (its lease then runs out, and the job is
-- released as lost, its attempt counted).
UPDATE fairway_job j SET lease_until = CASE
         WHEN j.state = 'running' AND j.timeout_ms IS NOT NULL AND j.started IS NOT NULL
         THEN LEAST(now() + $3::interval, j.started + j.timeout_ms * interval '1 millisecond' + 2 * $3::interval)
         ELSE now() + $3::interval END
 FROM unnest($5::text[], $2::text[]) AS h (group_name, id)
WHERE j.group_name = h.group_name AND j.id = h.id
  AND j.worker = $1 AND j.worker_instance = $4 AND j.state IN ('scheduled', 'running')
