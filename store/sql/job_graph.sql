-- The jobs of group $1 related to job $2 by depends_on: the job, the jobs
-- it depends on (transitively) and the jobs that depend on it
-- (transitively, through fairway_job_dependents), at most $3, in
-- submission order. Each walk stops 100 levels deep.
WITH RECURSIVE up (id, depth) AS (
    SELECT $2::text, 0
    UNION
    SELECT d.id, up.depth + 1
      FROM up
      JOIN fairway_job j ON j.group_name = $1 AND j.id = up.id
     CROSS JOIN LATERAL unnest(j.depends_on) AS d (id)
     WHERE up.depth < 100
), down (id, depth) AS (
    SELECT $2::text, 0
    UNION
    SELECT j.id, down.depth + 1
      FROM down
      JOIN fairway_job j ON j.depends_on @> ARRAY[down.id] AND j.depends_on IS NOT NULL AND j.group_name = $1
     WHERE down.depth < 100
)
SELECT {{job_columns}}
  FROM fairway_job
 WHERE group_name = $1 AND id IN (SELECT id FROM up UNION SELECT id FROM down)
 ORDER BY submitted, id
 LIMIT $3
