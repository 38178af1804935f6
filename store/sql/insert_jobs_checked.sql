-- insert_jobs.sql for a batch that PostgreSQL refused: the args come as
-- text and each is checked with fairway_jsonb_ok (a subtransaction per
-- row, paid only here). The rows it cannot store get a rejected event
-- (code invalid, field args, message $21) instead of a job, the others are
-- stored as insert_jobs.sql stores them: the poison costs this one extra
-- round trip and its own rejection. Rows come back as (group_name, id,
-- created): created rows, then the unstorable ones. $22 holds the
-- traceparents, $23 the timeouts and $24 the dependencies, as $21, $22
-- and $23 in insert_jobs.sql.
WITH u AS (
    SELECT u.*, fairway_jsonb_ok(u.args) AS ok
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                  $7::text[], $8::text[], $9::text[], $10::int[], $11::timestamptz[], $12::int[],
                  $19::timestamptz[], $20::timestamptz[], $22::text[], $23::bigint[], $24::text[])
           WITH ORDINALITY AS u (id, task, group_name, args, subject, submitter, priority,
                                 tracker, state, max_retries, run_at, pos, expires_at, trigger_after, traceparent, timeout_ms, depends_on, ord)
), ins AS (
    INSERT INTO fairway_job (id, task, group_name, args, subject, submitter, priority,
                             tracker, state, max_retries, run_at, submitted, expires_at, trigger_after, traceparent, timeout_ms, depends_on)
    SELECT i.id, i.task, i.group_name, i.args::jsonb, i.subject, i.submitter, i.priority,
           nullif(i.tracker, ''), i.state, i.max_retries,
           coalesce(i.run_at, now() + i.pos * interval '1 microsecond'),
           now() + i.pos * interval '1 microsecond', i.expires_at, i.trigger_after, nullif(i.traceparent, ''), nullif(i.timeout_ms, 0),
           string_to_array(nullif(i.depends_on, ''), ' ')
      FROM u AS i
     WHERE i.ok
     ORDER BY i.ord
        ON CONFLICT DO NOTHING
 RETURNING group_name, id, task, state
), ev AS (
    INSERT INTO fairway_event (job_id, task, group_name, state)
    SELECT id, task, group_name, state FROM ins
), rejected AS (
    -- Submissions that failed validation: an event each, no job.
    INSERT INTO fairway_event (job_id, group_name, task, state, error, code, field)
    SELECT r.id, r.group_name, r.task, 'rejected', r.error, r.code, r.field
      FROM unnest($13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[])
           WITH ORDINALITY AS r (id, group_name, task, error, code, field, ord)
     ORDER BY r.ord
), unstorable AS (
    -- The rows PostgreSQL cannot store: a rejected event each, no job.
    INSERT INTO fairway_event (job_id, group_name, task, state, error, code, field)
    SELECT u.id, u.group_name, u.task, 'rejected', $21, 'invalid', 'args'
      FROM u WHERE NOT u.ok ORDER BY u.ord
)
SELECT group_name, id, true FROM ins
UNION ALL
SELECT group_name, id, false FROM u WHERE NOT u.ok
