-- The listing order leaves the job row. Every transition of a job (claim,
-- start, end) writes a new row version, and PostgreSQL gives that version
-- an entry in every index on the table whose predicate it matches: the two
-- listing indexes (group_seq, seq) cost two index entries per transition,
-- about 10 us of PostgreSQL's CPU and 470 bytes of WAL per job on the
-- drain. Their order never changes after the insert, so it lives in a row
-- of its own, written once with the job and deleted with it (prune.sql);
-- listings walk it newest first and join the job by its key.
CREATE TABLE fairway_job_order (
    seq        bigint PRIMARY KEY, -- the job's seq
    group_name text NOT NULL,
    id         text NOT NULL
) WITH (
    -- Rows are only inserted and, by retention, deleted.
    autovacuum_vacuum_insert_scale_factor = 0.05
);
CREATE INDEX fairway_job_order_group ON fairway_job_order (group_name, seq);

INSERT INTO fairway_job_order (seq, group_name, id)
SELECT seq, group_name, id FROM fairway_job;

DROP INDEX fairway_job_seq;
DROP INDEX fairway_job_group_seq;
