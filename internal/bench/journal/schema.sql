-- A sketch of the batch journal (issue 19's next step): what PostgreSQL
-- pays per job when every batch (a submission batch, a claim, a batch of
-- ends) is one appended row, and the job row is written once, at its end.
DROP TABLE IF EXISTS sketch_journal, sketch_job;
CREATE TABLE sketch_journal (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    epoch    bigint NOT NULL,       -- the leader's fencing epoch
    kind     text NOT NULL,         -- submitted, scheduled, ended
    at       timestamptz NOT NULL DEFAULT now(),
    worker   text,
    job_ids  text[] NOT NULL,
    groups   text[] NOT NULL,
    tasks    text[],
    args     jsonb[],
    outcomes text[]
);
ALTER TABLE sketch_journal ALTER COLUMN job_ids SET STORAGE EXTERNAL, ALTER COLUMN groups SET STORAGE EXTERNAL,
    ALTER COLUMN tasks SET STORAGE EXTERNAL, ALTER COLUMN args SET STORAGE EXTERNAL, ALTER COLUMN outcomes SET STORAGE EXTERNAL;
-- The finished job, written once (the listing and retention indexes as today).
CREATE TABLE sketch_job (
    seq        bigint GENERATED ALWAYS AS IDENTITY,
    group_name text NOT NULL,
    id         text NOT NULL,
    task       text NOT NULL,
    args       jsonb NOT NULL,
    state      text NOT NULL,
    attempt    int NOT NULL,
    worker     text,
    submitted  timestamptz NOT NULL,
    started    timestamptz,
    finished   timestamptz,
    result     jsonb,
    error      text,
    PRIMARY KEY (group_name, id)
);
CREATE INDEX sketch_job_seq ON sketch_job (seq);
CREATE INDEX sketch_job_group_seq ON sketch_job (group_name, seq);
CREATE INDEX sketch_job_finished ON sketch_job (state, finished);
