-- Per group and bucket of $2 seconds from $1 to $3 (PostgreSQL's now), the
-- average number of the group's jobs running and waiting in the bucket. A
-- job's last attempt is running from its start to its end (or now); a job
-- is waiting from its due time (submitted, or the run_at it was delayed to
-- or retried at) to its start, its end without a start, or now while it
-- waits. Intervals are cut to the second and counted together, so that a
-- backlog submitted at once costs one row per second, not per job. $4: one
-- group, or '' for all. Columns: group, running (else waiting), bucket
-- index, average jobs.
WITH iv AS (
    SELECT group_name, true AS running, started AS s, coalesce(finished, $3::timestamptz) AS e
      FROM fairway_job
     WHERE started IS NOT NULL AND ($4::text = '' OR group_name = $4::text)
       AND ((state IN ('success', 'failed', 'cancelled') AND finished >= $1::timestamptz) OR state IN ('scheduled', 'running'))
    UNION ALL
    SELECT group_name, false, greatest(submitted, run_at),
           CASE WHEN state IN ('waiting', 'stuck') THEN $3::timestamptz ELSE coalesce(started, finished, $3::timestamptz) END
      FROM fairway_job
     WHERE ($4::text = '' OR group_name = $4::text)
       AND ((state IN ('success', 'failed', 'cancelled') AND finished >= $1::timestamptz) OR state IN ('scheduled', 'running', 'waiting', 'stuck'))
), cut AS (
    SELECT group_name, running,
           date_trunc('second', greatest(s, $1::timestamptz)) AS s, date_trunc('second', least(e, $3::timestamptz)) AS e, count(*) AS n
      FROM iv
     WHERE e > $1::timestamptz AND s < $3::timestamptz AND e > s
     GROUP BY 1, 2, 3, 4
)
SELECT group_name, running, b,
       (sum(n * extract(epoch FROM least(e, $1::timestamptz + (b + 1) * make_interval(secs => $2::float8))
                                 - greatest(s, $1::timestamptz + b * make_interval(secs => $2::float8)))) / $2::float8)::float8
FROM cut,
     generate_series(floor(extract(epoch FROM s - $1::timestamptz) / $2::float8)::int,
                     floor(extract(epoch FROM e - $1::timestamptz) / $2::float8)::int) AS b
WHERE e > s
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
