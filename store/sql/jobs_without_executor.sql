-- Per task, the jobs waiting for a task no live executor registered.
SELECT j.task, count(*) FROM fairway_job j
WHERE j.state IN ('pending', 'waiting', 'stuck')
  AND NOT EXISTS (SELECT 1 FROM fairway_executor e WHERE e.state = 'live' AND j.task = ANY (e.tasks))
GROUP BY j.task
