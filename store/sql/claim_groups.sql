-- The next groups, in name order after the round-robin cursor, that have a
-- due job of one of the given tasks: a loose index scan over
-- fairway_job_eligible that costs one index probe per group, however many
-- jobs each group holds.
-- $1: cursor (exclusive lower bound), $2: how many groups, $3: tasks.
WITH RECURSIVE walk (group_name, n) AS (
    (SELECT j.group_name, 1
       FROM fairway_job j
      WHERE j.state IN ('waiting', 'stuck') AND j.group_name > $1
        AND j.run_at <= now() AND j.task = ANY ($3::text[])
      ORDER BY j.group_name, j.state -- only fairway_job_eligible has this order
      LIMIT 1)
    UNION ALL
    SELECT (SELECT j.group_name
              FROM fairway_job j
             WHERE j.state IN ('waiting', 'stuck') AND j.group_name > w.group_name
               AND j.run_at <= now() AND j.task = ANY ($3::text[])
             ORDER BY j.group_name, j.state
             LIMIT 1),
           w.n + 1
      FROM walk w
     WHERE w.n < $2 AND w.group_name IS NOT NULL
)
SELECT group_name FROM walk WHERE group_name IS NOT NULL
