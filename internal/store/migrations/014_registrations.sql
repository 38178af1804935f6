-- Registrations counts the executor registrations that replaced an
-- instance, bumped under the fairness row's lock (executor_claims_wait.sql).
-- A submission handed straight to an idle executor (insert_jobs.sql) reads
-- whether that executor's instance is live from its statement's snapshot,
-- then waits for the fairness row: if a registration committed meanwhile,
-- the count it finds on the row differs from its snapshot's, and the job
-- is stored waiting instead of scheduled for an instance that is gone.
ALTER TABLE fairway_fairness ADD COLUMN registrations bigint NOT NULL DEFAULT 0;
