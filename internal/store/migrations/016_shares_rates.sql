-- Fair shares and rate limits (see internal/store/shares.go and internal/store/rates.go).

-- Each group's weight (default 1, without a row) and virtual time: its
-- service so far (jobs, or seconds of slot-time) divided by its weight.
-- The next job goes to the group whose virtual time is least. Read and
-- written by claims under the fairness lock.
CREATE TABLE fairway_group_share (
    group_name text PRIMARY KEY,
    weight     double precision NOT NULL DEFAULT 1 CHECK (weight > 0 AND weight <= 1000),
    vtime      double precision NOT NULL DEFAULT 0,
    updated    timestamptz NOT NULL DEFAULT now()
);

-- Claims ask whether any weight is not 1, on every claim.
CREATE INDEX fairway_group_share_weighted ON fairway_group_share (group_name) WHERE weight <> 1;

-- The clock of the virtual times: the start tag of the last job taken. A
-- group that had nothing waiting competes from it, with no credit.
ALTER TABLE fairway_fairness ADD COLUMN vclock double precision NOT NULL DEFAULT 0;

-- How long a group's jobs of a task run (a moving average of the attempts
-- that ended): what a job not yet run is expected to cost when fairness
-- counts time.
CREATE TABLE fairway_run_time (
    group_name text NOT NULL,
    task       text NOT NULL,
    avg_ms     double precision NOT NULL,
    runs       bigint NOT NULL DEFAULT 0,
    updated    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_name, task)
);

-- Rate limits: at most starts job starts (claims) per period of a task
-- (task set, group_name NULL), of a group (group_name set, task NULL), or
-- of a task in a group (both). group_name '*' applies to each group that
-- has no row of its own for the same task (or none), separately.
CREATE TABLE fairway_rate_limit (
    task       text NOT NULL DEFAULT '',   -- '': any task
    group_name text NOT NULL DEFAULT '',   -- '': the whole cluster; '*': each group
    starts     int NOT NULL CHECK (starts > 0),
    period_ms  bigint NOT NULL CHECK (period_ms >= 1000),
    updated    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, group_name),
    CHECK (task <> '' OR group_name <> '')
);

-- The token buckets of the rate limits, one per task, group, or task and
-- group they count (key), read and written by claims under the fairness
-- lock: tokens as of at.
CREATE TABLE fairway_rate_bucket (
    key    text PRIMARY KEY,
    tokens double precision NOT NULL,
    at     timestamptz NOT NULL
);
