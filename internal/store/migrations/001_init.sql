-- Fairway's schema: jobs, their logs, executors, the fairness state and the
-- event outbox.

CREATE TABLE fairway_job (
    id               text PRIMARY KEY,
    seq              bigint GENERATED ALWAYS AS IDENTITY, -- insertion order, for listing
    task             text NOT NULL,
    group_name       text NOT NULL,
    args             jsonb NOT NULL DEFAULT '{}',
    subject          text NOT NULL DEFAULT '',
    submitter        text NOT NULL DEFAULT '',
    priority         text NOT NULL CHECK (priority IN ('high', 'low')),
    tracker          text,
    state            text NOT NULL CHECK (state IN ('pending', 'waiting', 'scheduled', 'running', 'stuck', 'success', 'failed', 'cancelled')),
    retries          int NOT NULL DEFAULT 0,      -- failed attempts so far
    max_retries      int NOT NULL,                -- N retries: N+1 attempts
    attempt          int NOT NULL DEFAULT 0,      -- runs started so far
    run_at           timestamptz NOT NULL,        -- not eligible before (stuck: when the retry is due)
    expires_at       timestamptz,
    depends_on       text[],
    progress         smallint NOT NULL DEFAULT 0,
    worker           text,                        -- executor app-id holding it
    lease_until      timestamptz,
    cancel_requested boolean NOT NULL DEFAULT false,
    submitted        timestamptz NOT NULL,
    started          timestamptz,
    finished         timestamptz,
    result           jsonb,
    error            text
) WITH (
    -- Claimed rows leave dead entries in the eligible index until vacuum:
    -- vacuum this table often, and without throttling.
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 0,
    fillfactor = 90
);

-- Fair selection: walk the groups that have eligible jobs (loose index scan
-- on the leading column), then each group's best job by state, priority and
-- age. run_at and task are included so the filters need no heap access.
CREATE INDEX fairway_job_eligible ON fairway_job (group_name, state, priority, submitted, id)
    INCLUDE (run_at, task) WHERE state IN ('waiting', 'stuck');

-- Due stuck jobs of a group, oldest first: the first choice of a claim.
CREATE INDEX fairway_job_stuck ON fairway_job (group_name, submitted, id)
    INCLUDE (run_at, task) WHERE state = 'stuck';

-- Tracker de-duplication: one non-final job per tracker.
CREATE UNIQUE INDEX fairway_job_tracker ON fairway_job (tracker)
    WHERE tracker IS NOT NULL AND state NOT IN ('success', 'failed', 'cancelled');

-- Jobs held by executors: by executor, and (a scan of the whole index,
-- which holds only jobs in flight, at most the executors' slots) the ones
-- whose lease ran out.
CREATE INDEX fairway_job_held ON fairway_job (worker, lease_until) WHERE state IN ('scheduled', 'running');

-- Listing newest first, per group and overall. These order by seq, not
-- submitted, on purpose: an index that gives submitted order tempts the
-- planner away from fairway_job_eligible in the claim queries.
CREATE INDEX fairway_job_group_seq ON fairway_job (group_name, seq);
CREATE INDEX fairway_job_seq ON fairway_job (seq);

CREATE TABLE fairway_job_log (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id   text NOT NULL REFERENCES fairway_job (id) ON DELETE CASCADE,
    attempt  int NOT NULL,
    time     timestamptz NOT NULL,
    level    text NOT NULL,
    message  text NOT NULL
);
CREATE INDEX fairway_job_log_job ON fairway_job_log (job_id, id);

CREATE TABLE fairway_executor (
    app_id         text PRIMARY KEY,
    instance       text NOT NULL,
    host           text NOT NULL DEFAULT '',
    slots          int NOT NULL,
    running        int NOT NULL DEFAULT 0,
    tasks          text[] NOT NULL DEFAULT '{}',
    started        timestamptz NOT NULL,
    last_heartbeat timestamptz NOT NULL
);

-- The fair-selection state shared by every coordinator: the last group
-- served (round-robin cursor) and the position in the counting scheme.
CREATE TABLE fairway_fairness (
    id         int PRIMARY KEY CHECK (id = 1),
    last_group text NOT NULL,
    counter    bigint NOT NULL
);
INSERT INTO fairway_fairness (id, last_group, counter) VALUES (1, '', 0);

-- The outbox: every state change writes its event here in the same
-- transaction; a publisher sends them to JetStream and deletes them.
CREATE TABLE fairway_event (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     text NOT NULL,
    task       text NOT NULL,
    group_name text NOT NULL,
    state      text NOT NULL,
    prev_state text NOT NULL DEFAULT '',
    attempt    int NOT NULL DEFAULT 0,
    error      text NOT NULL DEFAULT '',
    code       text NOT NULL DEFAULT '',
    field      text NOT NULL DEFAULT '',
    worker     text NOT NULL DEFAULT '',
    time       timestamptz NOT NULL DEFAULT clock_timestamp()
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
