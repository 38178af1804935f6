-- Time-based jobs: pending jobs released at a time, expiry, and periodic
-- tasks fired on calendar events.

-- When a pending job is released by itself (NULL: only by hand).
ALTER TABLE fairway_job ADD COLUMN trigger_after timestamptz;

-- Pending jobs due for release, soonest first.
CREATE INDEX fairway_job_trigger ON fairway_job (trigger_after)
    WHERE state = 'pending' AND trigger_after IS NOT NULL;

-- Jobs not started yet that carry an expiry, soonest first.
CREATE INDEX fairway_job_expiry ON fairway_job (expires_at)
    WHERE expires_at IS NOT NULL AND state IN ('pending', 'waiting', 'stuck');

-- Periodic tasks (Docspell's design record 0012): a job submitted each
-- time the calendar event `timer` comes round. `marked` holds the
-- coordinator firing it and since when, so that only one fires it.
CREATE TABLE fairway_periodic_task (
    id          text PRIMARY KEY,
    enabled     boolean NOT NULL DEFAULT true,
    task        text NOT NULL,
    group_name  text NOT NULL,
    args        jsonb NOT NULL DEFAULT '{}',
    subject     text NOT NULL DEFAULT '',
    submitter   text NOT NULL DEFAULT '',
    priority    text NOT NULL CHECK (priority IN ('high', 'low')),
    worker      text,
    marked      timestamptz,
    timer       text NOT NULL,
    nextrun     timestamptz NOT NULL,
    created     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX fairway_periodic_task_due ON fairway_periodic_task (nextrun) WHERE enabled;

-- Events about periodic tasks (fired, skipped) name the task.
ALTER TABLE fairway_event ADD COLUMN periodic text NOT NULL DEFAULT '';
