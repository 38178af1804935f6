-- The concurrency limits, each with the jobs its task or group holds now
-- (scheduled or running; for '*', the most any one group holds).
WITH held AS MATERIALIZED (
    SELECT task, group_name FROM fairway_job_row WHERE state IN ('scheduled', 'running')
)
SELECT l.kind, l.name, l.max_running,
       CASE
           WHEN l.kind = 'task' THEN (SELECT count(*) FROM held h WHERE h.task = l.name)
           WHEN l.name = '*' THEN coalesce((SELECT max(n) FROM (SELECT count(*) AS n FROM held GROUP BY group_name) g), 0)
           ELSE (SELECT count(*) FROM held h WHERE h.group_name = l.name)
       END::int,
       l.updated
  FROM fairway_limit l
 ORDER BY l.kind, l.name
