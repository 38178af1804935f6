-- The groups that have blocked jobs (pending, with depends_on), in order:
-- a loose index scan of fairway_job_blocked, one descent per group.
WITH RECURSIVE g (group_name) AS (
    (SELECT group_name FROM fairway_job
      WHERE state = 'pending' AND depends_on IS NOT NULL
      ORDER BY group_name LIMIT 1)
    UNION ALL
    SELECT (SELECT j.group_name FROM fairway_job j
             WHERE j.state = 'pending' AND j.depends_on IS NOT NULL AND j.group_name > g.group_name
             ORDER BY j.group_name LIMIT 1)
      FROM g
     WHERE g.group_name IS NOT NULL
)
SELECT group_name FROM g WHERE group_name IS NOT NULL
