-- The tasks live executors registered.
SELECT DISTINCT unnest(tasks) AS t FROM fairway_executor WHERE state = 'live' ORDER BY t
