-- Applies executors' outcomes: success, error (retry while retries remain),
-- permanent (failed), cancelled, released (back to waiting, not a failure)
-- and lost (the executor died or restarted: a failure, due again at once).
-- An outcome applies only to the attempt it names, held by the executor that
-- sends it: a late result from an expired lease changes nothing.
-- Retry delay: retry-delay × 2^(retries-1) after the retries-th failure,
-- counted from the start of the failed attempt.
-- $1..$6: id, attempt, worker, outcome, result, error of each outcome;
-- $7: retry delay.
WITH o AS (
    SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::jsonb[], $6::text[])
           WITH ORDINALITY AS o (id, attempt, worker, outcome, result, error, ord)
), cur AS (
    SELECT j.id, j.state AS prev_state, o.worker, o.outcome, o.result, o.error, o.ord,
           CASE
               WHEN o.outcome = 'success' THEN 'success'
               WHEN o.outcome = 'cancelled' OR j.cancel_requested THEN 'cancelled'
               WHEN o.outcome = 'released' THEN 'waiting'
               WHEN o.outcome = 'permanent' OR j.retries >= j.max_retries THEN 'failed'
               ELSE 'stuck'
           END AS new_state
      FROM o
      JOIN fairway_job j ON j.id = o.id AND j.attempt = o.attempt AND j.worker = o.worker
     WHERE j.state IN ('scheduled', 'running')
       FOR UPDATE OF j
), upd AS (
    UPDATE fairway_job j
       SET state = cur.new_state,
           retries = j.retries + CASE WHEN cur.new_state IN ('stuck', 'failed') THEN 1 ELSE 0 END,
           run_at = CASE
                        WHEN cur.new_state = 'stuck' AND cur.outcome = 'lost' THEN now()
                        WHEN cur.new_state = 'stuck'
                            THEN coalesce(j.started, now()) + $7::interval * power(2, least(j.retries, 40))
                        WHEN cur.new_state = 'waiting' THEN now()
                        ELSE j.run_at
                    END,
           finished = CASE WHEN cur.new_state IN ('success', 'failed', 'cancelled') THEN now() END,
           result = CASE WHEN cur.new_state = 'success' THEN cur.result END,
           error = CASE WHEN cur.new_state = 'success' THEN NULL ELSE coalesce(nullif(cur.error, ''), j.error) END,
           progress = CASE WHEN cur.new_state = 'success' THEN 100 ELSE j.progress END,
           worker = CASE WHEN cur.new_state IN ('stuck', 'waiting') THEN NULL ELSE j.worker END,
           lease_until = NULL
      FROM cur
     WHERE j.id = cur.id
 RETURNING j.id, j.task, j.group_name, j.state, j.attempt, j.run_at, coalesce(j.error, '') AS error,
           cur.prev_state, cur.worker, cur.ord
), ev AS (
    INSERT INTO fairway_event (job_id, task, group_name, state, prev_state, attempt, error, worker)
    SELECT id, task, group_name, state, prev_state, attempt, error, worker FROM upd ORDER BY ord
)
SELECT id, state, run_at FROM upd ORDER BY ord
