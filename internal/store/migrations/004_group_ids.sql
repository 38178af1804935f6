-- A job is named by its group and its id: ids, trackers and
-- de-duplication are scoped per group, so that one tenant can neither
-- squat another's ids or trackers nor learn or reach another's jobs
-- through them. And a report applies only when it comes from the executor
-- instance that holds the job's current attempt.

-- The job log names the job by group and id.
ALTER TABLE fairway_job_log ADD COLUMN group_name text;
UPDATE fairway_job_log l SET group_name = j.group_name FROM fairway_job j WHERE j.id = l.job_id;
DELETE FROM fairway_job_log WHERE group_name IS NULL;
ALTER TABLE fairway_job_log ALTER COLUMN group_name SET NOT NULL;
ALTER TABLE fairway_job_log DROP CONSTRAINT fairway_job_log_job_id_fkey;
DROP INDEX fairway_job_log_job;

-- The primary key: (group_name, id). Ids were unique before, so they are
-- unique per group.
ALTER TABLE fairway_job DROP CONSTRAINT fairway_job_pkey;
ALTER TABLE fairway_job ADD CONSTRAINT fairway_job_pkey PRIMARY KEY (group_name, id);

ALTER TABLE fairway_job_log ADD CONSTRAINT fairway_job_log_job_fkey
    FOREIGN KEY (group_name, job_id) REFERENCES fairway_job (group_name, id) ON DELETE CASCADE;
CREATE INDEX fairway_job_log_job ON fairway_job_log (group_name, job_id, id);

-- Tracker de-duplication: one non-final job per tracker in each group.
DROP INDEX fairway_job_tracker;
CREATE UNIQUE INDEX fairway_job_tracker ON fairway_job (group_name, tracker)
    WHERE tracker IS NOT NULL AND state NOT IN ('success', 'failed', 'cancelled');

-- The executor instance that holds (or last held) the job's current
-- attempt, set by the claim; '' for a claim that named no instance.
-- Outcomes, starts, progress and log lines apply only when they come from
-- it. Kept when the attempt ends, so that log lines of the attempt that
-- arrive after its end still find their sender.
ALTER TABLE fairway_job ADD COLUMN worker_instance text NOT NULL DEFAULT '';
-- Attempts held now are held by the instance registered for their worker.
UPDATE fairway_job j SET worker_instance = e.instance
  FROM fairway_executor e
 WHERE e.app_id = j.worker AND j.state IN ('scheduled', 'running');
