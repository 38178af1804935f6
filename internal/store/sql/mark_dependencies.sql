-- Marks the jobs that others now depend on ($1 groups, $2 ids):
-- has_dependents tells a completion to resolve them. Run after the
-- dependents are stored and before they are first resolved. Rows are
-- locked in key order, as inserts lock theirs.
WITH d AS (
    SELECT j.group_name, j.id
      FROM fairway_job j
      JOIN unnest($1::text[], $2::text[]) AS m (group_name, id) ON j.group_name = m.group_name AND j.id = m.id
     WHERE NOT j.has_dependents
     ORDER BY j.group_name, j.id
       FOR UPDATE OF j
)
UPDATE fairway_job j SET has_dependents = true
  FROM d
 WHERE j.group_name = d.group_name AND j.id = d.id
