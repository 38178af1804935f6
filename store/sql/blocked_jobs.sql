-- Blocked jobs (pending, with depends_on) after the cursor ($1 group, $2
-- id; '' '' from the start), in key order, at most $3: the sweep's
-- candidates (see ResolveBlocked).
SELECT group_name, id FROM fairway_job
 WHERE state = 'pending' AND depends_on IS NOT NULL AND (group_name, id) > ($1, $2)
 ORDER BY group_name, id
 LIMIT $3
