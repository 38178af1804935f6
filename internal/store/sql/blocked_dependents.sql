-- The blocked jobs (pending, with depends_on) of group $1 that name one of
-- the jobs $2 (jobs of that group that ended), at most $3: the caller asks
-- for one more than it takes, and has a group with more swept instead (its
-- blocked jobs checked a bounded slice at a time). One scan of
-- fairway_job_dependents, and at most $3 heap rows of the group: the
-- dependents' arrays are not read (the index answers && exactly). OFFSET 0
-- keeps the group out of the scan's conditions: with it, the planner may
-- prefer fairway_job_blocked and read the depends_on of each of the
-- group's blocked jobs, however many they are.
SELECT n.id
  FROM (SELECT j.group_name, j.id, j.state
          FROM fairway_job j
         WHERE j.depends_on && $2::text[] AND j.depends_on IS NOT NULL
        OFFSET 0) n
 WHERE n.group_name = $1 AND n.state = 'pending'
 LIMIT $3
