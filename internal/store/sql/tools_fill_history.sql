-- The benchmark's history (internal/bench): finished jobs $1..$2 (successes
-- of task "work" that ended two hours ago, over 1,000 groups, ids $3 || i),
-- stored as years of use would leave them: as job rows, then moved into
-- batches of records (fairway_move_job_rows, migration 027).
INSERT INTO fairway_job_row (id, task, group_name, priority, state, max_retries, attempt,
    run_at, submitted, started, finished, result)
SELECT $3::text || i, 'work', $3::text || (i % 1000), 'low', 'success', 5, 1, t, t, t, t, '{}'
  FROM generate_series($1::bigint, $2::bigint) AS i, (SELECT now() - interval '2 hours' AS t) AS at
