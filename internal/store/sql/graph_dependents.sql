-- A step down a job's graph: the ended jobs of group $1 that name one of
-- the jobs $2 in their depends_on (their dependents), at most $3: the
-- batches whose waits name one (fairway_record_waits), then their records.
SELECT j.id
  FROM fairway_record_job j
 WHERE j.waits && $2::text[] AND j.waits IS NOT NULL
   AND j.group_name = $1 AND j.depends_on && $2::text[]
 LIMIT $3
