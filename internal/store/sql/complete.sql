-- Applies executors' outcomes: success, error (retry while retries remain),
-- permanent (failed), cancelled, released (back to waiting, not a failure),
-- snoozed (back to waiting, due after its delay, not a failure) and lost (the executor died or restarted: a failure, due again at once).
-- An outcome applies only to the attempt it names, held by the executor
-- instance that sends it: a late result from an expired lease, or a report
-- forged by another executor, changes nothing.
-- Retry delay: retry-delay × 2^(retries-1) after the retries-th failure,
-- counted from the start of the failed attempt.
-- An outcome may carry the time its attempt started (the start and the end
-- were reported together): a job still scheduled then passes through
-- running in the same statement, with both events, and one row write.
-- $1..$6: id, attempt, worker, outcome, result, error of each outcome;
-- $7: retry delay; $8: started_at of each outcome, or NULL; $9, $10: the
-- group and the worker's instance of each outcome; $11: each snoozed
-- outcome's delay in seconds (0 for the others).
-- Each row returned says whether other jobs depend on the job
-- (has_dependents): only then must its end be followed by resolving them.
--
-- No row lock before the update (a lock is a write of its own: 4 us of
-- PostgreSQL's CPU per job). The outcome is worked out from the row as the
-- statement's snapshot has it (cur), and the update applies only if what
-- that used is unchanged in the row it updates: PostgreSQL re-reads a row
-- updated since the snapshot and tests the WHERE clause again on the
-- newest version. A row changed meanwhile in a way that matters (a start
-- recorded, a cancel requested) is left alone: its outcome was found
-- applicable (considered) but not applied, and the caller applies it
-- again, in a new statement that sees the change. A change that does not
-- matter (a lease extended) does not stop the update.
WITH o AS (
    SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::jsonb[], $6::text[], $8::timestamptz[], $9::text[], $10::text[], $11::float8[])
           WITH ORDINALITY AS o (id, attempt, worker, outcome, result, error, started_at, group_name, instance, snooze, ord)
), cur AS (
    SELECT j.group_name, j.id, j.state AS prev_state, o.worker, o.instance, o.attempt, o.outcome, o.result, o.error, o.snooze, o.ord,
           j.cancel_requested, j.retries, j.max_retries,
           (o.started_at IS NOT NULL AND j.state = 'scheduled') AS via_running,
           -- A reported start is kept between the claim and now (see mark_running.sql).
           coalesce(CASE WHEN j.state = 'scheduled' AND o.started_at IS NOT NULL
                         THEN least(now(), greatest(o.started_at, j.scheduled_at)) END, j.started) AS started,
           CASE
               WHEN o.outcome = 'success' THEN 'success'
               WHEN o.outcome = 'cancelled' OR j.cancel_requested THEN 'cancelled'
               WHEN o.outcome IN ('released', 'snoozed') THEN 'waiting'
               WHEN o.outcome = 'permanent' OR j.retries >= j.max_retries THEN 'failed'
               ELSE 'stuck'
           END AS new_state
      FROM o
     -- One primary-key look-up per outcome, whatever the statistics say.
     -- LIMIT 1 keeps the state test out of the subquery: pushed down, it
     -- let the planner pick fairway_job_held when statistics (taken during
     -- a backlog) expect few held jobs, and scan every held job once per
     -- outcome: quadratic, 11 s for a batch of 10,000.
     CROSS JOIN LATERAL (SELECT j.* FROM fairway_job j WHERE j.group_name = o.group_name AND j.id = o.id LIMIT 1) j
     WHERE j.attempt = o.attempt AND j.worker = o.worker AND j.worker_instance = o.instance
       AND j.state IN ('scheduled', 'running')
), upd AS (
    UPDATE fairway_job j
       SET state = cur.new_state,
           started = cur.started,
           retries = j.retries + CASE WHEN cur.new_state IN ('stuck', 'failed') THEN 1 ELSE 0 END,
           run_at = CASE
                        WHEN cur.new_state = 'stuck' AND cur.outcome = 'lost' THEN now()
                        WHEN cur.new_state = 'stuck'
                            THEN coalesce(cur.started, now()) + $7::interval * power(2, least(j.retries, 40))
                        WHEN cur.new_state = 'waiting' THEN now() + make_interval(secs => cur.snooze)
                        ELSE j.run_at
                    END,
           finished = CASE WHEN cur.new_state IN ('success', 'failed', 'cancelled') THEN now() END,
           result = CASE WHEN cur.new_state = 'success' THEN cur.result END,
           error = CASE WHEN cur.new_state = 'success' THEN NULL ELSE coalesce(nullif(cur.error, ''), j.error) END,
           progress = CASE WHEN cur.new_state = 'success' THEN 100 ELSE j.progress END,
           worker = CASE WHEN cur.new_state IN ('stuck', 'waiting') THEN NULL ELSE j.worker END,
           lease_until = NULL
      FROM cur
     -- By id, not ctid: a row updated since this statement's snapshot (a
     -- heartbeat, a cancel) is found again through its update chain, and
     -- updated only if what cur read from it still holds.
     WHERE j.group_name = cur.group_name AND j.id = cur.id
       AND j.state = cur.prev_state AND j.attempt = cur.attempt AND j.worker = cur.worker AND j.worker_instance = cur.instance
       AND j.cancel_requested = cur.cancel_requested AND j.retries = cur.retries AND j.max_retries = cur.max_retries
 RETURNING j.id, j.task, j.group_name, j.state, j.attempt, j.run_at, coalesce(j.error, '') AS error,
           cur.prev_state, cur.via_running, cur.started, cur.worker, cur.ord, j.has_dependents
), evs AS (
    SELECT upd.id, upd.task, upd.group_name, e.state, e.prev_state, upd.attempt, e.error, upd.worker, e.time, upd.ord, e.k
      FROM upd
     CROSS JOIN LATERAL (VALUES
           (0, 'running', 'scheduled', '', upd.started),
           (1, upd.state, CASE WHEN upd.via_running THEN 'running' ELSE upd.prev_state END, upd.error, clock_timestamp())
           ) AS e (k, state, prev_state, error, time)
     WHERE e.k = 1 OR upd.via_running
), ev AS (
    -- One pack of the outcomes' events (see 011_event_packs.sql).
    INSERT INTO fairway_event (job_id, task, group_name, state, n, pack_job_ids, pack_tasks, pack_groups, pack_states, pack_prev_states,
                               pack_attempts, pack_errors, pack_workers, pack_times)
    -- The aggregates read the sorted rows in order: one sort for all
    -- (PostgreSQL 15 sorts once per aggregate given an ORDER BY of its own).
    SELECT '', '', '', '', count(*), array_agg(id), array_agg(task), array_agg(group_name),
           array_agg(state), array_agg(prev_state), array_agg(attempt),
           array_agg(error), array_agg(worker), array_agg(time)
      FROM (SELECT * FROM evs ORDER BY ord, k) evs
    HAVING count(*) > 0
)
-- The outcomes applied, in order, then the ord of every outcome that cur
-- found applicable (considered): those of them not applied raced. (The
-- caller takes the difference: an anti-join here is planned as a nested
-- loop over both lists, quadratic in the batch.)
SELECT false AS considered, group_name, id, state, run_at, has_dependents, ord FROM upd
 UNION ALL
SELECT true, NULL, NULL, NULL, NULL, NULL, ord FROM cur
 ORDER BY considered, ord
