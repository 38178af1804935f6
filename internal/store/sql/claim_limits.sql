-- The concurrency limits, read under the fairness lock, with the jobs
-- executors hold now (scheduled or running): every claim sees the same
-- counts, whichever coordinator makes it. Rows:
--   ('task', task, max, held of that task)
--   ('group', group or '*', max, 0)
--   ('held', group, 0, held of that group): only when a group limit exists.
-- Without limits, the held jobs are not read at all (a one-time filter).
WITH l AS (
    SELECT kind, name, max_running FROM fairway_limit
), held AS MATERIALIZED (
    SELECT j.task, j.group_name
      FROM fairway_job j
     WHERE j.state IN ('scheduled', 'running') AND EXISTS (SELECT 1 FROM l)
)
SELECT 'task' AS kind, l.name, l.max_running, (SELECT count(*) FROM held h WHERE h.task = l.name)
  FROM l WHERE l.kind = 'task'
UNION ALL
SELECT 'group', l.name, l.max_running, 0
  FROM l WHERE l.kind = 'group'
UNION ALL
SELECT 'held', h.group_name, 0, count(*)
  FROM held h
 WHERE EXISTS (SELECT 1 FROM l WHERE l.kind = 'group')
 GROUP BY h.group_name
