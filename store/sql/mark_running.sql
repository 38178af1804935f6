-- Marks scheduled jobs running when their executor reports the start.
-- $1..$3: id, attempt, worker of each report.
WITH s AS (
    SELECT s.*, j.task, j.group_name
      FROM unnest($1::text[], $2::int[], $3::text[]) WITH ORDINALITY AS s (id, attempt, worker, ord)
     -- One primary-key look-up per report, whatever the statistics say.
     -- LIMIT 1 keeps the state test out of the subquery: pushed down, it
     -- let the planner pick fairway_job_held when statistics (taken during
     -- a backlog) expect few held jobs, and scan every held job once per
     -- report: quadratic, 11 s for a batch of 10,000.
     CROSS JOIN LATERAL (SELECT j.* FROM fairway_job j WHERE j.id = s.id LIMIT 1 FOR UPDATE) j
     WHERE j.attempt = s.attempt AND j.worker = s.worker AND j.state = 'scheduled'
), upd AS (
    UPDATE fairway_job j
       SET state = 'running', started = now()
      FROM s
     WHERE j.id = s.id
 RETURNING j.id, j.task, j.group_name, j.attempt, j.worker, s.ord
)
INSERT INTO fairway_event (job_id, task, group_name, state, prev_state, attempt, worker)
SELECT id, task, group_name, 'running', 'scheduled', attempt, worker FROM upd ORDER BY ord
