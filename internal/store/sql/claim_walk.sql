-- The groups that have a due job of one of the given tasks, in round-robin
-- order: after the cursor up to the last name, then from the first name up
-- to the cursor itself (wrap-around), at most $2 in all. Each step is one
-- probe of fairway_job_eligible (a loose index scan), however many jobs a
-- group holds; the ORDER BY (group_name, state) is one that only that index
-- gives, so the planner cannot swap it for a sort of every row.
-- $1: cursor, or NULL to read it from fairway_fairness; $2: how many
-- groups; $3: tasks; $4: groups to leave out (at their concurrency limit):
-- stepped over, one probe each, and not counted (NULL: none).
WITH RECURSIVE cur AS (
    SELECT coalesce($1::text, (SELECT last_group FROM fairway_fairness WHERE id = 1)) AS c
), walk (group_name, n) AS (
    (SELECT j.group_name, CASE WHEN j.group_name = ANY (coalesce($4::text[], '{}')) THEN 0 ELSE 1 END
       FROM fairway_job j
      WHERE j.state IN ('waiting', 'stuck') AND j.group_name > (SELECT c FROM cur)
        AND j.run_at <= now() AND j.task = ANY ($3::text[])
      ORDER BY j.group_name, j.state
      LIMIT 1)
    UNION ALL
    SELECT nxt.group_name, w.n + CASE WHEN nxt.group_name = ANY (coalesce($4::text[], '{}')) THEN 0 ELSE 1 END
      FROM walk w
     CROSS JOIN LATERAL (
           SELECT (SELECT j.group_name
                     FROM fairway_job j
                    WHERE j.state IN ('waiting', 'stuck') AND j.group_name > w.group_name
                      AND j.run_at <= now() AND j.task = ANY ($3::text[])
                    ORDER BY j.group_name, j.state
                    LIMIT 1) AS group_name) nxt
     WHERE w.n < $2 AND w.group_name IS NOT NULL
), found AS (
    SELECT count(*) AS n FROM walk WHERE group_name IS NOT NULL AND NOT group_name = ANY (coalesce($4::text[], '{}'))
), wrap (group_name, n) AS (
    (SELECT j.group_name, CASE WHEN j.group_name = ANY (coalesce($4::text[], '{}')) THEN 0 ELSE 1 END
       FROM fairway_job j
      WHERE j.state IN ('waiting', 'stuck') AND j.group_name <= (SELECT c FROM cur)
        AND (SELECT n FROM found) < $2 AND (SELECT c FROM cur) <> ''
        AND j.run_at <= now() AND j.task = ANY ($3::text[])
      ORDER BY j.group_name, j.state
      LIMIT 1)
    UNION ALL
    SELECT nxt.group_name, w.n + CASE WHEN nxt.group_name = ANY (coalesce($4::text[], '{}')) THEN 0 ELSE 1 END
      FROM wrap w
     CROSS JOIN LATERAL (
           SELECT (SELECT j.group_name
                     FROM fairway_job j
                    WHERE j.state IN ('waiting', 'stuck') AND j.group_name > w.group_name
                      AND j.group_name <= (SELECT c FROM cur)
                      AND j.run_at <= now() AND j.task = ANY ($3::text[])
                    ORDER BY j.group_name, j.state
                    LIMIT 1) AS group_name) nxt
     WHERE w.n < $2 - (SELECT n FROM found) AND w.group_name IS NOT NULL
)
SELECT group_name
  FROM (SELECT group_name, 1 AS part, n FROM walk
        UNION ALL
        SELECT group_name, 2 AS part, n FROM wrap) steps
 WHERE group_name IS NOT NULL AND NOT group_name = ANY (coalesce($4::text[], '{}'))
 ORDER BY part, n
