-- The fault suite's accounting (internal/chaos): the unfinished jobs'
-- state and attempts, on either engine (on the journal's, fairway_job
-- holds a job's record from its end only). Read before the records
-- (tools_job_attempts.sql), so that a job that ends between the two is in
-- one at least.
SELECT id, state, attempt, retries FROM fairway_live
