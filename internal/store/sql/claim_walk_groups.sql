-- claim_walk.sql for an executor whose credential grants some groups only:
-- of those groups, the ones that have a due job of one of the given tasks,
-- in round-robin order from the cursor (after it, then wrapping around), at
-- most $2. One probe of fairway_job_eligible per granted group.
-- $1: cursor, or NULL to read it from fairway_fairness; $2: how many
-- groups; $3: tasks; $4: groups to leave out (at their concurrency limit;
-- NULL: none); $5: the granted groups.
WITH cur AS (
    SELECT coalesce($1::text, (SELECT last_group FROM fairway_fairness WHERE id = 1)) AS c
)
SELECT g.name
  FROM unnest($5::text[]) AS g (name)
 WHERE NOT g.name = ANY (coalesce($4::text[], '{}'))
   AND EXISTS (SELECT 1
                 FROM fairway_job j
                WHERE j.group_name = g.name AND j.state IN ('waiting', 'stuck')
                  AND j.run_at <= now() AND j.task = ANY ($3::text[]))
 ORDER BY g.name <= (SELECT c FROM cur), g.name
 LIMIT $2
