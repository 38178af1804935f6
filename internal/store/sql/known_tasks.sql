-- The tasks any executor ever registered.
SELECT DISTINCT unnest(tasks) AS t FROM fairway_executor ORDER BY t
