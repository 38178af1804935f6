-- The records as json, and each batch's arrays in line with its records
-- (issue 31, docs/journal.md "Records by batch").
--
-- jsonb cost the leader's PostgreSQL 4–5 µs of CPU per ended job: the
-- server parses the batch's text into its binary form on every insert,
-- for reads that parse json's text a few times faster only (a batch of
-- 1,000 records: 0.8 ms as jsonb, 3.3 ms as json). Since the stats read
-- the batches' arrays (fairway_record_stat) and a job's record is found
-- by its place (fairway_records_of, below), a batch is expanded whole
-- only by lists, graphs and operators' scans (docs/performance.md,
-- "2026-11-30, fifth session").
--
-- keys and the s_ arrays hold one entry per record, in the records'
-- order: retention's prune and a retry by hand, which take records out
-- of a batch, took them out of the jobs alone until now, so that the
-- stats still counted them. The batches they rewrote are made whole
-- again here.
DROP FUNCTION fairway_records_of(text, text[]);
DROP VIEW fairway_job;
DROP VIEW fairway_record_job;

ALTER TABLE fairway_record ALTER COLUMN jobs TYPE json USING jobs::json;
DO $$
BEGIN
    ALTER TABLE fairway_record ALTER COLUMN jobs SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this PostgreSQL has no lz4: the records stay compressed with pglz';
END
$$;

UPDATE fairway_record b
   SET keys = a.keys, groups = a.groups, s_groups = a.s_groups, s_tasks = a.s_tasks, s_states = a.s_states,
       s_started = a.s_started, s_due = a.s_due,
       s_finished = CASE WHEN b.s_finished IS NULL THEN NULL ELSE a.s_finished END
  FROM (SELECT r.id,
               array_agg(hashtextextended((x.e->>'group_name') || E'\x1f' || (x.e->>'id'), 0) ORDER BY x.o) AS keys,
               array_agg(DISTINCT x.e->>'group_name') AS groups,
               array_agg(x.e->>'group_name' ORDER BY x.o) AS s_groups,
               array_agg(x.e->>'task' ORDER BY x.o) AS s_tasks,
               array_agg(x.e->>'state' ORDER BY x.o) AS s_states,
               array_agg(coalesce((x.e->>'started')::bigint, 0) ORDER BY x.o) AS s_started,
               array_agg(greatest((x.e->>'submitted')::bigint, (x.e->>'run_at')::bigint) ORDER BY x.o) AS s_due,
               array_agg((x.e->>'finished')::bigint ORDER BY x.o) AS s_finished
          FROM fairway_record r
         CROSS JOIN LATERAL json_array_elements(r.jobs) WITH ORDINALITY AS x (e, o)
         WHERE cardinality(r.keys) <> json_array_length(r.jobs)
         GROUP BY r.id) a
 WHERE b.id = a.id;

-- As in migration 027, over json.
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
 CROSS JOIN LATERAL json_to_recordset(b.jobs) AS r (n bigint, group_name text, id text, task text, args jsonb, subject text,
       submitter text, priority text, tracker text, state text, retries int, max_retries int, attempt int, run_at bigint,
       expires_at bigint, depends_on text[], progress int, worker text, worker_instance text, submitted bigint,
       scheduled_at bigint, started bigint, finished bigint, result jsonb, error text, traceparent text, timeout_ms bigint);

CREATE VIEW fairway_job AS
SELECT id, seq, task, group_name, args, subject, submitter, priority, tracker, state, retries, max_retries, attempt, run_at,
       expires_at, depends_on, progress, worker, lease_until, false AS cancel_requested, submitted, started,
       finished, result, error, trigger_after, NULL::text AS claim_id, worker_instance, traceparent,
       timeout_ms, false AS has_dependents, scheduled_at
  FROM fairway_record_job;

-- The records of jobs ids of group g: the batches whose keys hold one,
-- and there the records at the places of its key (keys is in the
-- records' order), not the batch's other records. A key two jobs of a
-- batch share gives both places; the group and id decide.
CREATE FUNCTION fairway_records_of(g text, ids text[]) RETURNS SETOF fairway_record_job
    LANGUAGE sql STABLE AS $$
    SELECT b.id, b.id * 1048576 + r.n, b.partition, b.keys, b.groups, b.waits, b.finished,
           r.id, r.task, r.group_name, coalesce(r.args, '{}'), coalesce(r.subject, ''),
           coalesce(r.submitter, ''), coalesce(r.priority, 'low'), r.tracker, r.state,
           coalesce(r.retries, 0), coalesce(r.max_retries, 0), coalesce(r.attempt, 0),
           to_timestamp(r.run_at / 1e6::float8), to_timestamp(r.expires_at / 1e6::float8), r.depends_on,
           coalesce(r.progress, 0)::smallint, r.worker, coalesce(r.worker_instance, ''),
           to_timestamp(r.submitted / 1e6::float8), to_timestamp(r.scheduled_at / 1e6::float8),
           to_timestamp(r.started / 1e6::float8), coalesce(to_timestamp(r.finished / 1e6::float8), b.finished),
           r.result, r.error, r.traceparent, r.timeout_ms, NULL::timestamptz, NULL::timestamptz
      FROM (SELECT DISTINCT i, hashtextextended(g || E'\x1f' || i, 0) AS key FROM unnest(ids) AS i) w
      JOIN fairway_record b ON b.keys @> ARRAY[w.key]
     CROSS JOIN LATERAL unnest(array_positions(b.keys, w.key)) AS p (at)
     CROSS JOIN LATERAL json_to_record(b.jobs -> (p.at - 1)) AS r (n bigint, group_name text, id text, task text, args jsonb,
           subject text, submitter text, priority text, tracker text, state text, retries int, max_retries int, attempt int,
           run_at bigint, expires_at bigint, depends_on text[], progress int, worker text, worker_instance text,
           submitted bigint, scheduled_at bigint, started bigint, finished bigint, result jsonb, error text,
           traceparent text, timeout_ms bigint)
     WHERE r.group_name = g AND r.id = w.i
$$;

-- As in migration 027, building json.
CREATE OR REPLACE FUNCTION fairway_move_job_rows() RETURNS bigint
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
               json_agg(json_build_object('n', n.k, 'group_name', n.group_name, 'id', n.id, 'task', n.task, 'args', n.args,
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

-- Takes the records at places gone (1-based, in jobs) out of batch b, and
-- returns their groups and ids: the batch is deleted when none is left,
-- else written again with its arrays in line (retention's prune.sql, a
-- retry by hand: journal's forgetRecordsSQL). Its writers run after
-- journal.RecordsLockSQL: one at a time.
CREATE OR REPLACE FUNCTION fairway_records_drop(b bigint, gone bigint[]) RETURNS TABLE (group_name text, id text)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT x.e->>'group_name', x.e->>'id'
      FROM fairway_record r
     CROSS JOIN LATERAL json_array_elements(r.jobs) WITH ORDINALITY AS x (e, o)
     WHERE r.id = b AND x.o = ANY (gone);
    DELETE FROM fairway_record r
     WHERE r.id = b AND NOT EXISTS (SELECT 1 FROM generate_series(1, json_array_length(r.jobs)) AS p (at) WHERE p.at <> ALL (gone));
    IF FOUND THEN
        RETURN;
    END IF;
    UPDATE fairway_record r
       SET jobs = k.jobs, keys = k.keys, groups = k.groups, s_groups = k.s_groups, s_tasks = k.s_tasks,
           s_states = k.s_states, s_started = k.s_started, s_due = k.s_due,
           s_finished = CASE WHEN r.s_finished IS NULL THEN NULL ELSE k.s_finished END
      FROM (SELECT json_agg(x.e ORDER BY x.o) AS jobs, array_agg(a.keys[x.o] ORDER BY x.o) AS keys,
                   array_agg(DISTINCT a.s_groups[x.o]) AS groups, array_agg(a.s_groups[x.o] ORDER BY x.o) AS s_groups,
                   array_agg(a.s_tasks[x.o] ORDER BY x.o) AS s_tasks, array_agg(a.s_states[x.o] ORDER BY x.o) AS s_states,
                   array_agg(a.s_started[x.o] ORDER BY x.o) AS s_started, array_agg(a.s_due[x.o] ORDER BY x.o) AS s_due,
                   array_agg(a.s_finished[x.o] ORDER BY x.o) AS s_finished
              FROM fairway_record a
             CROSS JOIN LATERAL json_array_elements(a.jobs) WITH ORDINALITY AS x (e, o)
             WHERE a.id = b AND x.o <> ALL (gone)) k
     WHERE r.id = b;
END
$$;
