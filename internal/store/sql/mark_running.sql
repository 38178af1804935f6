-- Marks scheduled jobs running when their executor reports the start.
-- $1..$3: id, attempt, worker of each report; $4, $5: its group and the
-- worker's instance; $6: when the attempt started by the executor's clock
-- (NULL: now), kept between the claim (scheduled_at) and now. Only the
-- instance holding the attempt marks it.
WITH s AS MATERIALIZED (
    SELECT s.*, j.task, j.state AS prev_state,
           least(now(), greatest(coalesce(s.at, now()), j.scheduled_at)) AS started
      FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::timestamptz[]) WITH ORDINALITY AS s (id, attempt, worker, group_name, instance, at, ord)
     -- One primary-key look-up per report, whatever the statistics say.
     -- LIMIT 1 keeps the state test out of the subquery: pushed down, it
     -- let the planner pick fairway_job_held when statistics (taken during
     -- a backlog) expect few held jobs, and scan every held job once per
     -- report: quadratic, 11 s for a batch of 10,000.
     CROSS JOIN LATERAL (SELECT j.* FROM fairway_job j WHERE j.group_name = s.group_name AND j.id = s.id LIMIT 1) j
     WHERE j.attempt = s.attempt AND j.worker = s.worker AND j.worker_instance = s.instance AND j.state = 'scheduled'
), upd AS (
    UPDATE fairway_job j
       SET state = 'running', started = s.started
      FROM s
     -- No row lock before: the conditions are tested again on the newest
     -- version of a row updated since the snapshot (an end, a cancel, a
     -- new claim), which is then left alone. They compare with s's
     -- columns (MATERIALIZED: a black box to the planner), not constants,
     -- so that the planner cannot walk fairway_job_held instead of the
     -- primary key (TestReportBatchesFindJobsByPrimaryKey).
     WHERE j.group_name = s.group_name AND j.id = s.id
       AND j.attempt = s.attempt AND j.worker = s.worker AND j.worker_instance = s.instance AND j.state = s.prev_state
 RETURNING j.id, j.task, j.group_name, j.attempt, j.worker, s.ord
)
-- One pack of the starts' events (see 011_event_packs.sql).
INSERT INTO fairway_event (job_id, task, group_name, state, prev_state, n, pack_job_ids, pack_tasks, pack_groups, pack_attempts, pack_workers)
SELECT '', '', '', 'running', 'scheduled', count(*), array_agg(id), array_agg(task), array_agg(group_name),
       array_agg(attempt), array_agg(worker)
  FROM (SELECT * FROM upd ORDER BY ord) upd
HAVING count(*) > 0
