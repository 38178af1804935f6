-- Blocked jobs (pending, with depends_on) of each group $1 after its
-- cursor $2 ('' from the start), in key order, at most $3 a group: a slice
-- of each group's sweep (see Store.BlockedJobs). An index-only range scan
-- of fairway_job_blocked per group.
SELECT g.group_name, b.id
  FROM unnest($1::text[], $2::text[]) AS g (group_name, after_id)
 CROSS JOIN LATERAL (
       SELECT j.id
         FROM fairway_job j
        WHERE j.group_name = g.group_name AND j.state = 'pending' AND j.depends_on IS NOT NULL
          AND j.id > g.after_id
        ORDER BY j.id
        LIMIT $3
       ) b
