-- The records of ended jobs by batch (issue 31, docs/journal.md "Records
-- by batch"): the journal's leader writes one row per batch of jobs it
-- ends, where it wrote a row per job (a job's heap tuple, key and four
-- index entries cost PostgreSQL about 16 µs of CPU and 590 bytes of WAL;
-- a batch's row a few per job, docs/performance.md "The records, measured
-- apart"). fairway_job becomes a view of them, with the columns it had.
--
-- The table of job rows stays, renamed, for the row engine's unfinished
-- rows that 'fairway migrate --to-journal' converts; its finished rows
-- move into batches (fairway_move_job_rows, which the conversion runs
-- again for the jobs it ends).
ALTER TABLE fairway_job RENAME TO fairway_job_row;
-- A job's log lines are kept while it runs, before its record exists, and
-- deleted with it by retention (the journal's engine dropped this key at
-- its start; a database of the row engine still has it, and moving its
-- finished rows would delete their logs).
ALTER TABLE fairway_job_log DROP CONSTRAINT IF EXISTS fairway_job_log_job_fkey;

CREATE TABLE fairway_record (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    partition smallint NOT NULL DEFAULT 0,
    -- When the batch's jobs ended; a record may carry its own (one moved
    -- from a job row), never later than this.
    finished  timestamptz NOT NULL,
    -- hashtextextended(group || E'\x1f' || id, 0) of each job: the
    -- indexed way to a job's record (fairway_records_of).
    keys      bigint[] NOT NULL,
    groups    text[] NOT NULL,
    -- The ids the batch's jobs depended on (graphs of dependents).
    waits     text[],
    -- What the stats read of each record, in the records' order (its
    -- group, task, final state, start, due time: the later of its
    -- submission and its run_at; and its end when it is not the
    -- batch's): arrays, read by unnest without the records
    -- (fairway_record_stat).
    s_groups   text[] NOT NULL,
    s_tasks    text[] NOT NULL,
    s_states   text[] NOT NULL,
    s_started  bigint[] NOT NULL,
    s_due      bigint[] NOT NULL,
    s_finished bigint[],
    -- The records, an array of objects: fairway_record_job's columns.
    -- jsonb: a read takes the fields it needs (the stats read a few of
    -- 300,000 records in 0.27 s, where json's text took 1.25 s to parse).
    jobs      jsonb NOT NULL
) WITH (
    -- Rows are only inserted and, by retention, deleted.
    autovacuum_vacuum_insert_scale_factor = 0.05
);
DO $$
BEGIN
    ALTER TABLE fairway_record ALTER COLUMN jobs SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this PostgreSQL has no lz4: the records stay compressed with pglz';
END
$$;
CREATE INDEX fairway_record_keys ON fairway_record USING gin (keys);
CREATE INDEX fairway_record_groups ON fairway_record USING gin (groups);
CREATE INDEX fairway_record_waits ON fairway_record USING gin (waits) WHERE waits IS NOT NULL;
CREATE INDEX fairway_record_finished ON fairway_record (finished);

-- The records, one row each: seq orders them (newest ended last), and the
-- batch's columns say where each is (batch, keys, groups, waits,
-- batch_finished: a condition on them uses the batch's indexes).
CREATE VIEW fairway_record_job AS
SELECT b.id AS batch, b.id * 1048576 + r.n AS seq, b.partition, b.keys, b.groups, b.waits, b.finished AS batch_finished,
       r.id, r.task, r.group_name, coalesce(r.args, '{}') AS args, coalesce(r.subject, '') AS subject,
       coalesce(r.submitter, '') AS submitter, coalesce(r.priority, 'low') AS priority, r.tracker, r.state,
       coalesce(r.retries, 0) AS retries, coalesce(r.max_retries, 0) AS max_retries, coalesce(r.attempt, 0) AS attempt,
       to_timestamp(r.run_at / 1e6::float8) AS run_at, to_timestamp(r.expires_at / 1e6::float8) AS expires_at, r.depends_on,
       coalesce(r.progress, 0)::smallint AS progress, r.worker, coalesce(r.worker_instance, '') AS worker_instance,
       to_timestamp(r.submitted / 1e6::float8) AS submitted, to_timestamp(r.scheduled_at / 1e6::float8) AS scheduled_at,
       to_timestamp(r.started / 1e6::float8) AS started, coalesce(to_timestamp(r.finished / 1e6::float8), b.finished) AS finished,
       r.result, r.error, r.traceparent, r.timeout_ms,
       NULL::timestamptz AS lease_until, NULL::timestamptz AS trigger_after
  FROM fairway_record b
 CROSS JOIN LATERAL jsonb_to_recordset(b.jobs) AS r (n bigint, group_name text, id text, task text, args jsonb, subject text,
       submitter text, priority text, tracker text, state text, retries int, max_retries int, attempt int, run_at bigint,
       expires_at bigint, depends_on text[], progress int, worker text, worker_instance text, submitted bigint,
       scheduled_at bigint, started bigint, finished bigint, result jsonb, error text, traceparent text, timeout_ms bigint);

-- What the stats (store/sql/stats_*.sql, group_shares.sql) read of
-- each record, from the batch's arrays: a month of records without
-- their arguments, results and other fields.
CREATE VIEW fairway_record_stat AS
SELECT b.id AS batch, b.finished AS batch_finished, u.group_name, u.task, u.state,
       to_timestamp(nullif(u.started, 0) / 1e6::float8) AS started, to_timestamp(u.due / 1e6::float8) AS due,
       coalesce(to_timestamp(u.finished / 1e6::float8), b.finished) AS finished
  FROM fairway_record b
 CROSS JOIN LATERAL unnest(b.s_groups, b.s_tasks, b.s_states, b.s_started, b.s_due, b.s_finished)
       AS u (group_name, task, state, started, due, finished);

-- For operators, the columns the table had (docs/operations.md, "SQL for
-- operators"). A query of one job by its group and id expands every
-- batch here: fairway_records_of is the indexed way.
CREATE VIEW fairway_job AS
SELECT id, seq, task, group_name, args, subject, submitter, priority, tracker, state, retries, max_retries, attempt, run_at,
       expires_at, depends_on, progress, worker, lease_until, false AS cancel_requested, submitted, started,
       finished, result, error, trigger_after, NULL::text AS claim_id, worker_instance, traceparent,
       timeout_ms, false AS has_dependents, scheduled_at
  FROM fairway_record_job;

-- The records of jobs ids of group g, through the batches' keys.
CREATE FUNCTION fairway_records_of(g text, ids text[]) RETURNS SETOF fairway_record_job
    LANGUAGE sql STABLE AS $$
    SELECT * FROM fairway_record_job
     WHERE keys && ARRAY(SELECT hashtextextended(g || E'\x1f' || i, 0) FROM unnest(ids) AS i)
       AND group_name = g AND id = ANY (ids)
$$;

-- Moves the finished rows of fairway_job_row into batches of 1,000,
-- oldest ended first, each record with its own finished time, and takes
-- their ids for good (fairway_job_id), as the journal's submissions do.
-- Returns how many it moved.
CREATE FUNCTION fairway_move_job_rows() RETURNS bigint
    LANGUAGE sql AS $$
    WITH done AS (
        DELETE FROM fairway_job_row WHERE state IN ('success', 'failed', 'cancelled') RETURNING *
    ), numbered AS (
        SELECT d.*, (row_number() OVER (ORDER BY d.finished, d.seq) - 1) / 1000 AS chunk,
               (row_number() OVER (ORDER BY d.finished, d.seq) - 1) % 1000 AS k
          FROM done d
    ), waits AS (
        SELECT chunk, array_agg(DISTINCT w) AS waits FROM numbered, unnest(depends_on) AS w GROUP BY 1
    ), batches AS (
        INSERT INTO fairway_record (partition, finished, keys, groups, waits, s_groups, s_tasks, s_states, s_started, s_due,
                                    s_finished, jobs)
        SELECT 0, max(n.finished), array_agg(hashtextextended(n.group_name || E'\x1f' || n.id, 0) ORDER BY n.k),
               array_agg(DISTINCT n.group_name), (SELECT w.waits FROM waits w WHERE w.chunk = n.chunk),
               array_agg(n.group_name ORDER BY n.k), array_agg(n.task ORDER BY n.k), array_agg(n.state ORDER BY n.k),
               array_agg(coalesce((extract(epoch FROM n.started) * 1e6)::bigint, 0) ORDER BY n.k),
               array_agg((extract(epoch FROM greatest(n.submitted, n.run_at)) * 1e6)::bigint ORDER BY n.k),
               array_agg((extract(epoch FROM n.finished) * 1e6)::bigint ORDER BY n.k),
               jsonb_agg(jsonb_build_object('n', n.k, 'group_name', n.group_name, 'id', n.id, 'task', n.task, 'args', n.args,
                   'subject', n.subject, 'submitter', n.submitter, 'priority', n.priority, 'tracker', n.tracker, 'state', n.state,
                   'retries', n.retries, 'max_retries', n.max_retries, 'attempt', n.attempt,
                   'run_at', (extract(epoch FROM n.run_at) * 1e6)::bigint, 'expires_at', (extract(epoch FROM n.expires_at) * 1e6)::bigint,
                   'depends_on', n.depends_on, 'progress', n.progress, 'worker', n.worker, 'worker_instance', n.worker_instance,
                   'submitted', (extract(epoch FROM n.submitted) * 1e6)::bigint,
                   'scheduled_at', (extract(epoch FROM n.scheduled_at) * 1e6)::bigint,
                   'started', (extract(epoch FROM n.started) * 1e6)::bigint, 'finished', (extract(epoch FROM n.finished) * 1e6)::bigint,
                   'result', n.result, 'error', n.error, 'traceparent', n.traceparent, 'timeout_ms', n.timeout_ms) ORDER BY n.k)
          FROM numbered n
         GROUP BY n.chunk
        RETURNING 1
    ), taken AS (
        INSERT INTO fairway_job_id (group_name, id) SELECT group_name, id FROM done ON CONFLICT DO NOTHING
    )
    SELECT count(*) FROM done
$$;

SELECT fairway_move_job_rows();

-- fairway_live reads the row engine's unfinished rows from the table of
-- job rows, as before; the records' view holds none.
CREATE OR REPLACE FUNCTION fairway_live(wait interval DEFAULT '15 seconds')
RETURNS TABLE (group_name text, id text, task text, state text, priority text, run_at timestamptz, expires_at timestamptz,
               attempt int, retries int, max_retries int, depends_on text[], executor text, instance text,
               submitted timestamptz, scheduled_at timestamptz, started timestamptz, args jsonb, as_of timestamptz)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    asked   timestamptz := clock_timestamp();
    p       smallint;
    behind  smallint[];
BEGIN
    -- The journal's partitions (none on the row engine).
    SELECT array_agg(l.partition) INTO behind FROM fairway_journal_lease l;
    IF behind IS NOT NULL AND current_setting('transaction_isolation') <> 'read committed' THEN
        -- Its statements see the transaction's snapshot, taken before
        -- the leader's write: waiting would see nothing new.
        RAISE WARNING 'fairway_live: in a % transaction, the unfinished jobs are as the leader last wrote them (as_of): read it in a READ COMMITTED one to see every change committed before the read', current_setting('transaction_isolation');
        behind := NULL;
    END IF;
    IF behind IS NOT NULL THEN
        FOREACH p IN ARRAY behind LOOP
            PERFORM pg_advisory_xact_lock_shared(1279874629, p); -- 'LIVE'
        END LOOP;
        LOOP
            -- A statement each time: it sees what committed since.
            SELECT array_agg(l.partition) INTO behind
              FROM fairway_journal_lease l LEFT JOIN fairway_live_state s USING (partition)
             WHERE s.written IS NULL OR s.written < asked;
            EXIT WHEN behind IS NULL;
            IF clock_timestamp() > asked + wait THEN
                RAISE WARNING 'fairway_live: the leader of journal partitions % did not write its jobs within %: they are as it last wrote them (as_of)', behind, wait;
                EXIT;
            END IF;
            PERFORM pg_sleep(0.01);
        END LOOP;
    END IF;
    RETURN QUERY
    SELECT j.group_name, j.id, j.task, j.state, j.priority, j.run_at, j.expires_at, j.attempt, j.retries, j.max_retries, j.depends_on,
           j.worker, nullif(j.worker_instance, ''), j.submitted, j.scheduled_at, j.started, j.args, now()
      FROM fairway_job_row j
     WHERE j.state NOT IN ('success', 'failed', 'cancelled')
    UNION ALL
    SELECT l.group_name, l.id, l.task, l.state, l.priority, coalesce(l.run_at, r.at), l.expires_at, l.attempt, l.retries, l.max_retries,
           l.depends_on, l.worker, l.worker_instance, r.at + l.journal_index * interval '1 microsecond', l.scheduled_at, l.started,
           NULL::jsonb, s.written
      FROM fairway_live_job l
      LEFT JOIN fairway_journal r ON r.id = l.journal_row
      LEFT JOIN fairway_live_state s ON s.partition = coalesce(r.partition, 0);
END
$$;
