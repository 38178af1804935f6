-- Per task, the jobs not started yet (pending, waiting, stuck) of a task no
-- live executor registered. The live executors' tasks are read once (an
-- InitPlan), and each job's task tested against that list: one scan of the
-- jobs not started, whatever the number of executors.
SELECT j.task, count(*) FROM fairway_job j
WHERE j.state IN ('pending', 'waiting', 'stuck')
  AND NOT j.task = ANY (ARRAY(SELECT DISTINCT unnest(e.tasks) FROM fairway_executor e WHERE e.state = 'live'))
GROUP BY j.task
