-- Refreshes the planner statistics of the records' batches.
ANALYZE fairway_record
