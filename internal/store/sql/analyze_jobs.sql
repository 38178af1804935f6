-- Refreshes the planner statistics of the job table.
ANALYZE fairway_job
