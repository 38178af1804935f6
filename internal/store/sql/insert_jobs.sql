-- Inserts jobs and their first events, and the rejected events of
-- submissions that failed validation, in one statement (one round trip).
-- Each @name is an array with one element per row (insertRows in
-- insert.go: a column is added there and here, nowhere else), or a single
-- value. The rows come in id order (so that concurrent batches lock in the
-- same order); @pos is each one's place in the submission order, which
-- orders their submitted times. A row whose id exists already in its
-- group, or whose tracker is held by a non-final job of its group, is
-- skipped; the caller finds out which and why. @traceparent '' is none
-- (stored as NULL), @timeout_ms 0 none, @depends_on the ids separated by
-- spaces ('' for none; ids hold no spaces).
--
-- Checked (a batch PostgreSQL refused): the args come as @text_args
-- instead of @args, and each is checked with fairway_jsonb_ok (a
-- subtransaction per row, paid only then). A row it cannot store gets a
-- rejected event (code invalid, field args, message @unstorable) instead
-- of a job, the others are stored: the poison costs one extra round trip
-- and its own rejection.
--
-- A row whose state is 'scheduled' is handed straight to an idle
-- executor (see Store.InsertJobsFor): @worker its app-id, @instance its
-- instance ('' for any), @claim_id its dispatch request's id, @lease the
-- lease. It is stored scheduled, attempt 1, with the events of a
-- submission and a claim (-> waiting, waiting -> scheduled); stored
-- waiting instead when that instance is not the one registered now, and
-- live, or when concurrency limits exist (a claim applies them; the
-- caller's knowledge of them may be older than this statement), or when
-- a registration of the executor committed while this statement waited
-- for the fairness row (see 014_registrations.sql), or when the instance
-- would hold more than @max_held jobs with these.
--
-- Rows come back as (group_name, id, created, state, run_at, submitted,
-- lease_until): the created rows, then the unstorable ones (created false).
WITH assignee AS (
    -- A hand-over takes the fairness row's lock first (it moves the cursor,
    -- below), so it waits for a registration in progress. The instance's
    -- liveness is read from this statement's snapshot, taken before that
    -- wait: a registration that committed during it shows as a count on
    -- the row (its newest version, locked) that differs from the
    -- snapshot's, and then nothing is handed over.
    SELECT NOT EXISTS (SELECT 1 FROM fairway_limit)
           AND (@instance::text = '' OR EXISTS (
               SELECT 1 FROM fairway_executor e WHERE e.app_id = @worker AND e.instance = @instance AND e.state = 'live'))
           AND f.registrations = (SELECT s.registrations FROM fairway_fairness s WHERE s.id = 1)
           -- The instance holds at most @max_held jobs with these (0: no cap).
           AND (@max_held::int <= 0
                OR (SELECT count(*) FROM fairway_job j
                     WHERE j.worker = @worker AND j.worker_instance = @instance AND j.state IN ('scheduled', 'running'))
                   + cardinality(array_positions(@state::text[], 'scheduled')) <= @max_held) AS live
      FROM fairway_fairness f
     WHERE f.id = 1 AND @worker::text <> ''
       FOR UPDATE
), given AS (
    SELECT i.*
      FROM unnest(@id::text[], @task::text[], @group_name::text[], @args::jsonb[], @text_args::text[], @subject::text[],
                  @submitter::text[], @priority::text[], @tracker::text[], @state::text[], @max_retries::int[],
                  @run_at::timestamptz[], @pos::int[], @expires_at::timestamptz[], @trigger_after::timestamptz[],
                  @traceparent::text[], @timeout_ms::bigint[], @depends_on::text[])
           WITH ORDINALITY AS i (id, task, group_name, args, text_args, subject, submitter, priority, tracker, state, max_retries,
                                 run_at, pos, expires_at, trigger_after, traceparent, timeout_ms, depends_on, ord)
), rows AS (
    SELECT i.*, i.state = 'scheduled' AND coalesce((SELECT live FROM assignee), false) AS assigned,
           i.text_args IS NULL OR fairway_jsonb_ok(i.text_args) AS storable
      FROM given i
), ins AS (
    INSERT INTO fairway_job (id, task, group_name, args, subject, submitter, priority,
                             tracker, state, max_retries, run_at, submitted, expires_at, trigger_after, traceparent, timeout_ms, depends_on,
                             attempt, worker, worker_instance, lease_until, claim_id, scheduled_at)
    SELECT i.id, i.task, i.group_name, coalesce(i.args, i.text_args::jsonb), i.subject, i.submitter, i.priority,
           nullif(i.tracker, ''), CASE WHEN i.state = 'scheduled' AND NOT i.assigned THEN 'waiting' ELSE i.state END, i.max_retries,
           coalesce(i.run_at, now() + i.pos * interval '1 microsecond'),
           now() + i.pos * interval '1 microsecond', i.expires_at, i.trigger_after, nullif(i.traceparent, ''), nullif(i.timeout_ms, 0),
           string_to_array(nullif(i.depends_on, ''), ' '),
           CASE WHEN i.assigned THEN 1 ELSE 0 END, CASE WHEN i.assigned THEN @worker END, CASE WHEN i.assigned THEN @instance ELSE '' END,
           CASE WHEN i.assigned THEN now() + @lease::interval END, CASE WHEN i.assigned THEN nullif(@claim_id, '') END,
           CASE WHEN i.assigned THEN now() END
      FROM rows AS i
     WHERE i.storable
     ORDER BY i.ord
        ON CONFLICT DO NOTHING
 RETURNING group_name, id, task, state, run_at, submitted, lease_until, seq
), ordered AS (
    -- The job's place in the listings (see 013_job_order.sql).
    INSERT INTO fairway_job_order (seq, group_name, id)
    SELECT seq, group_name, id FROM ins
), ev AS (
    -- One pack of the batch's first events (see 011_event_packs.sql); a
    -- job handed to an executor has its claim's event too, after every
    -- first event (so after its own). The claim's fields go in arrays only
    -- when some job was handed over: else every event has the scalar
    -- columns' defaults.
    INSERT INTO fairway_event (job_id, task, group_name, state, n, pack_job_ids, pack_tasks, pack_groups, pack_states, pack_prev_states,
                               pack_attempts, pack_workers)
    SELECT '', '', '', '', count(*), array_agg(id), array_agg(task), array_agg(group_name), array_agg(state),
           CASE WHEN bool_or(k = 1) THEN array_agg(prev_state) END, CASE WHEN bool_or(k = 1) THEN array_agg(attempt) END,
           CASE WHEN bool_or(k = 1) THEN array_agg(worker) END
      FROM (SELECT id, task, group_name, 0 AS k, CASE WHEN state = 'scheduled' THEN 'waiting' ELSE state END AS state,
                   '' AS prev_state, 0 AS attempt, '' AS worker
              FROM ins
            UNION ALL
            SELECT id, task, group_name, 1, 'scheduled', 'waiting', 1, @worker
              FROM ins WHERE state = 'scheduled') evs
    HAVING count(*) > 0
), handed AS (
    -- A job handed over counts as a claim's pick: the round-robin cursor
    -- moves to its group and the counting scheme one step on, per job (the
    -- fairness row is locked only when a job was handed over).
    SELECT (array_agg(r.group_name ORDER BY r.ord DESC))[1] AS group_name, count(*) AS n
      FROM ins JOIN rows r ON r.group_name = ins.group_name AND r.id = ins.id
     WHERE ins.state = 'scheduled'
), cursor AS (
    UPDATE fairway_fairness f SET last_group = h.group_name, counter = f.counter + h.n
      FROM handed h
     WHERE f.id = 1 AND h.n > 0
), rejected AS (
    -- Submissions that failed validation: an event each, no job.
    INSERT INTO fairway_event (job_id, group_name, task, state, error, code, field)
    SELECT r.id, r.group_name, r.task, 'rejected', r.error, r.code, r.field
      FROM unnest(@rejected_id::text[], @rejected_group::text[], @rejected_task::text[], @rejected_error::text[],
                  @rejected_code::text[], @rejected_field::text[])
           WITH ORDINALITY AS r (id, group_name, task, error, code, field, ord)
     ORDER BY r.ord
), unstorable AS (
    -- The rows PostgreSQL cannot store (checked batches only): a rejected
    -- event each, no job.
    INSERT INTO fairway_event (job_id, group_name, task, state, error, code, field)
    SELECT u.id, u.group_name, u.task, 'rejected', @unstorable, 'invalid', 'args'
      FROM rows u WHERE NOT u.storable ORDER BY u.ord
)
SELECT group_name, id, true, state, run_at, submitted, lease_until FROM ins
UNION ALL
SELECT group_name, id, false, NULL, NULL, NULL, NULL FROM rows WHERE NOT storable
