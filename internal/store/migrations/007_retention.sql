-- Retention: finished jobs are pruned by age per final state, oldest
-- first. This index holds final jobs only, so it costs one entry when a job
-- ends (that update is never HOT anyway: it changes state).
CREATE INDEX fairway_job_finished ON fairway_job (state, finished)
    WHERE state IN ('success', 'failed', 'cancelled');
