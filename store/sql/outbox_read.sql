-- The oldest outbox rows, up to $1 events: whole rows, so a pack (see
-- 011_event_packs.sql) is never split; at least one row.
SELECT id, job_id, task, group_name, state, prev_state, attempt, error, code, field, worker, periodic, time,
       pack_job_ids, pack_tasks, pack_groups, pack_states, pack_prev_states, pack_attempts, pack_errors, pack_workers, pack_times
  FROM (SELECT e.*, sum(e.n) OVER (ORDER BY e.id) AS upto
          FROM (SELECT * FROM fairway_event ORDER BY id LIMIT $1) e) e
 WHERE e.upto - e.n < $1
 ORDER BY id
