-- The oldest outbox rows, up to $1 events: whole rows, so a pack (see
-- 011_event_packs.sql) is never split; at least one row. None unless this
-- transaction holds the publisher's advisory lock ($2: its key; taken by
-- outbox_lock.sql before this statement, and again here, which costs
-- nothing when held). The lock is an InitPlan, tested once before the scan
-- (a one-time filter): a coordinator that does not hold it reads no row.
SELECT id, job_id, task, group_name, state, prev_state, attempt, error, code, field, worker, periodic, time,
       pack_job_ids, pack_tasks, pack_groups, pack_states, pack_prev_states, pack_attempts, pack_errors, pack_workers, pack_times
  FROM (SELECT e.*, sum(e.n) OVER (ORDER BY e.id) AS upto
          FROM (SELECT * FROM fairway_event WHERE (SELECT pg_try_advisory_xact_lock($2)) ORDER BY id LIMIT $1) e) e
 WHERE e.upto - e.n < $1
 ORDER BY id
