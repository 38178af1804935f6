-- A step down a job's graph: the jobs of group $1 that name one of the
-- jobs $2 in their depends_on (their dependents), at most $3. One scan of
-- fairway_job_dependents; the LIMIT stops the heap reads. OFFSET 0 keeps
-- the group out of the scan's conditions (see blocked_dependents.sql).
SELECT n.id
  FROM (SELECT j.group_name, j.id
          FROM fairway_job j
         WHERE j.depends_on && $2::text[] AND j.depends_on IS NOT NULL
        OFFSET 0) n
 WHERE n.group_name = $1
 LIMIT $3
