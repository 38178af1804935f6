-- Dependencies and concurrency limits.
--
-- A job with depends_on is stored pending and released (or cancelled) when
-- its dependencies end. fairway_job_dependents finds the jobs that name a
-- given job, fairway_job_blocked the jobs still waiting for theirs. Both
-- are partial: jobs without dependencies (nearly all) cost them nothing.
CREATE INDEX fairway_job_dependents ON fairway_job USING gin (depends_on)
    WHERE depends_on IS NOT NULL;
CREATE INDEX fairway_job_blocked ON fairway_job (group_name, id)
    WHERE state = 'pending' AND depends_on IS NOT NULL;
-- Set on a job when another names it in depends_on: a completion returns
-- it, so that only the ends of jobs that have dependents cost a look-up of
-- them (a constant default: no rewrite of the table).
ALTER TABLE fairway_job ADD COLUMN has_dependents boolean NOT NULL DEFAULT false;

-- Concurrency limits, read by every claim under the fairness lock, so that
-- every coordinator enforces the same ones: at most max_running jobs of a
-- task (kind 'task') or of a group (kind 'group'; name '*' is the default
-- for every group without a row of its own) are held by executors
-- (scheduled or running) at once.
CREATE TABLE fairway_limit (
    kind        text NOT NULL CHECK (kind IN ('task', 'group')),
    name        text NOT NULL,
    max_running int NOT NULL CHECK (max_running >= 0),
    updated     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, name)
);
