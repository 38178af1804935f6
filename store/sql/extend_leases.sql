-- Renews the leases of executor $1 (instance $4) on jobs ($5 groups, $2
-- ids) it still holds, to now() + $3.
UPDATE fairway_job j SET lease_until = now() + $3::interval
 FROM unnest($5::text[], $2::text[]) AS h (group_name, id)
WHERE j.group_name = h.group_name AND j.id = h.id
  AND j.worker = $1 AND j.worker_instance = $4 AND j.state IN ('scheduled', 'running')
