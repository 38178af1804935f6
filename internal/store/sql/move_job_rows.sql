-- Moves the ended jobs' rows of fairway_job_row into batches of records
-- (migration 027): a database of the row engine moved onto the journal,
-- the benchmark's history.
SELECT fairway_move_job_rows()
