-- When a job was last handed to an executor (scheduled): the coordinators
-- bound how long an executor may hold a job it has not started, whatever
-- it heartbeats (see extend_leases.sql). A nullable column without a
-- default rewrites no rows.
ALTER TABLE fairway_job ADD COLUMN scheduled_at timestamptz;
