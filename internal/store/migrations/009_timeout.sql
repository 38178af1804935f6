-- Timeouts: each attempt of a job may run at most this long (the
-- submission's timeout; NULL: the executor's default for the task, if
-- any). A nullable column without a default rewrites no rows.
ALTER TABLE fairway_job ADD COLUMN timeout_ms bigint;
