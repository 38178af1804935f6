-- Marks the chosen jobs scheduled for an executor, writes their events and
-- returns them in claim order: those still in the state the candidates'
-- query read.
-- $1: ids in claim order, $7: their groups, $2: their previous states,
-- $3: executor app-id,
-- $4: lease, $5: the executor's instance ('' for any): jobs are only marked
-- for the instance registered now. claim_lock.sql refuses a claim for
-- another instance; this check covers a registration committed between
-- that statement and this one.
-- $6: the dispatch request's id, or ''. The instance is recorded with the
-- attempt: only reports from it apply (see complete.sql).
-- A new attempt starts with progress 0 and no error: the previous
-- attempt's stay in its events (the stuck or failed one carries its
-- error), not on the job, which shows the attempt it runs.
WITH chosen AS (
    SELECT * FROM unnest($1::text[], $7::text[], $2::text[]) WITH ORDINALITY AS c (id, group_name, prev_state, ord)
), claimed AS (
    UPDATE fairway_job j
       SET state = 'scheduled', worker = $3, worker_instance = $5, lease_until = now() + $4::interval, scheduled_at = now(),
           attempt = j.attempt + 1, claim_id = nullif($6, ''), progress = 0, error = NULL
      FROM chosen c
     WHERE j.group_name = c.group_name AND j.id = c.id
       -- The candidates were read without a row lock (a lock is a write of
       -- its own): a job that changed since (cancelled, expired) is left
       -- out. PostgreSQL tests this on the newest version of the row.
       AND j.state = c.prev_state AND j.run_at <= now()
       AND ($5 = '' OR EXISTS (SELECT 1 FROM fairway_executor e WHERE e.app_id = $3 AND e.instance = $5 AND e.state = 'live'))
 RETURNING c.ord, c.prev_state, j.*
), ev AS (
    -- One pack of the claim's events (see 011_event_packs.sql).
    INSERT INTO fairway_event (job_id, task, group_name, state, worker, n, pack_job_ids, pack_tasks, pack_groups, pack_prev_states, pack_attempts)
    -- The aggregates read the sorted rows in order: one sort for all.
    SELECT '', '', '', 'scheduled', $3, count(*), array_agg(id), array_agg(task), array_agg(group_name),
           array_agg(prev_state), array_agg(attempt)
      FROM (SELECT * FROM claimed ORDER BY ord) claimed
    HAVING count(*) > 0
)
SELECT {{job_columns}} FROM claimed ORDER BY ord
