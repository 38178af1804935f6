-- Wait and run time percentiles in seconds, per task and over all tasks
-- (task NULL), of the jobs that ended since $1 and of those running now;
-- $2: one group, or '' for all. Wait: from the job's due time (submitted,
-- or the run_at it was delayed to or retried at) to its start; run: from
-- its start to its end. Columns: task, started, ended, wait p50, wait p99,
-- run p50, run p99.
WITH j AS (
    SELECT task, started, finished, due
      FROM fairway_record_stat
     WHERE batch_finished >= $1::timestamptz AND finished >= $1::timestamptz AND ($2::text = '' OR group_name = $2::text)
    UNION ALL
    -- The journal engine's started held jobs, from its state: task,
    -- started, due ($3..$5; empty on the row engine).
    SELECT task, started, NULL, due FROM unnest($3::text[], $4::timestamptz[], $5::timestamptz[]) AS l (task, started, due)
), t AS (
    SELECT task, started, finished,
           date_part('epoch', started - least(started, due)) AS wait,
           date_part('epoch', finished - started) AS run
      FROM j
)
SELECT task, count(started), count(run),
       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY wait), 0),
       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY wait), 0),
       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY run), 0),
       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY run), 0)
FROM t
GROUP BY GROUPING SETS ((task), ())
ORDER BY task NULLS FIRST
