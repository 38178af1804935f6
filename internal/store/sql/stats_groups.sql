-- Per group and bucket of $2 seconds from $1 to $3 (PostgreSQL's now), the
-- average number of the group's jobs running and waiting in the bucket. A
-- job's last attempt is running from its start to its end (or now); a job
-- is waiting from its due time (submitted, or the run_at it was delayed to
-- or retried at) to its start, its end without a start, or now while it
-- waits. $4: one group, or '' for all. Columns: group, running (else
-- waiting), bucket index, average jobs.
--
-- One scan gives both intervals of a job, in seconds from $1. Intervals
-- that start in the same second and end in the same second are summed
-- together (a backlog submitted at once costs a row per second, not per
-- job), and still exactly: bucket bounds are whole seconds from $1 (a whole
-- second), so within one such set each bound cuts all of its intervals or
-- none.
WITH j AS (
    SELECT group_name, state, started, finished, greatest(submitted, run_at) AS due
      FROM fairway_job
     WHERE ($4::text = '' OR group_name = $4::text)
       AND ((state IN ('success', 'failed', 'cancelled') AND finished >= $1::timestamptz)
            OR state IN ('scheduled', 'running', 'waiting', 'stuck'))
), iv AS (
    SELECT group_name, v.running,
           extract(epoch FROM greatest(v.s, $1::timestamptz) - $1::timestamptz)::float8 AS s,
           extract(epoch FROM least(v.e, $3::timestamptz) - $1::timestamptz)::float8 AS e
      FROM j CROSS JOIN LATERAL (VALUES
           -- Waiting or stuck again: its start is an earlier attempt's.
           (true, CASE WHEN j.state NOT IN ('waiting', 'stuck') THEN j.started END, coalesce(j.finished, $3::timestamptz)),
           (false, j.due, CASE WHEN j.state IN ('waiting', 'stuck') THEN $3::timestamptz
                               ELSE coalesce(j.started, j.finished, $3::timestamptz) END)) AS v(running, s, e)
     WHERE v.s IS NOT NULL
), sets AS (
    SELECT group_name, running, floor(s) AS s0, floor(e) AS e0, count(*) AS n, sum(s) AS sum_s, sum(e) AS sum_e
      FROM iv
     WHERE e > s
     GROUP BY 1, 2, 3, 4
)
SELECT group_name, running, b,
       sum(CASE WHEN (b + 1) * $2::float8 <= e0 THEN n * (b + 1) * $2::float8 ELSE sum_e END
         - CASE WHEN b * $2::float8 > s0 THEN n * b * $2::float8 ELSE sum_s END) / $2::float8
FROM sets, generate_series(floor(s0 / $2::float8)::int, floor(e0 / $2::float8)::int) AS b
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
