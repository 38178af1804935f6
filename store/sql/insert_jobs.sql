-- Inserts jobs and their first events, and the rejected events of
-- submissions that failed validation, in one statement (one round trip). The rows come in id order (so that
-- concurrent batches lock in the same order); pos is each one's place in the
-- submission order, which orders their submitted times. A row whose id exists already in its
-- group, or whose tracker is held by a non-final job of its group, is
-- skipped; the caller finds out which and why. $21 holds each row's
-- traceparent ('' for none, stored as NULL), $22 its timeout in ms (0: none),
-- $23 its depends_on, the ids separated by spaces ('' for none; ids hold
-- no spaces).
WITH ins AS (
    INSERT INTO fairway_job (id, task, group_name, args, subject, submitter, priority,
                             tracker, state, max_retries, run_at, submitted, expires_at, trigger_after, traceparent, timeout_ms, depends_on)
    SELECT i.id, i.task, i.group_name, i.args, i.subject, i.submitter, i.priority,
           nullif(i.tracker, ''), i.state, i.max_retries,
           coalesce(i.run_at, now() + i.pos * interval '1 microsecond'),
           now() + i.pos * interval '1 microsecond', i.expires_at, i.trigger_after, nullif(i.traceparent, ''), nullif(i.timeout_ms, 0),
           string_to_array(nullif(i.depends_on, ''), ' ')
      FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::text[], $6::text[],
                  $7::text[], $8::text[], $9::text[], $10::int[], $11::timestamptz[], $12::int[],
                  $19::timestamptz[], $20::timestamptz[], $21::text[], $22::bigint[], $23::text[])
           WITH ORDINALITY AS i (id, task, group_name, args, subject, submitter, priority,
                                 tracker, state, max_retries, run_at, pos, expires_at, trigger_after, traceparent, timeout_ms, depends_on, ord)
     ORDER BY i.ord
        ON CONFLICT DO NOTHING
 RETURNING group_name, id, task, state
), ev AS (
    -- One pack of the batch's first events (see 011_event_packs.sql).
    INSERT INTO fairway_event (job_id, task, group_name, state, n, pack_job_ids, pack_tasks, pack_groups, pack_states)
    SELECT '', '', '', '', count(*), array_agg(id), array_agg(task), array_agg(group_name), array_agg(state)
      FROM ins
    HAVING count(*) > 0
), rejected AS (
    -- Submissions that failed validation: an event each, no job.
    INSERT INTO fairway_event (job_id, group_name, task, state, error, code, field)
    SELECT r.id, r.group_name, r.task, 'rejected', r.error, r.code, r.field
      FROM unnest($13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[])
           WITH ORDINALITY AS r (id, group_name, task, error, code, field, ord)
     ORDER BY r.ord
)
SELECT group_name, id FROM ins
