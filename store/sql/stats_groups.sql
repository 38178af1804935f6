-- Per group and bucket of $2 seconds from $1 to $3 (PostgreSQL's now), the
-- average number of the group's jobs running and waiting in the bucket. A
-- job's last attempt is running from its start to its end (or now); a job
-- is waiting from its due time (submitted, or the run_at it was delayed to
-- or retried at) to its start, its end without a start, or now while it
-- waits. $4: one group, or '' for all. Columns: group, running (else
-- waiting), bucket index, average jobs.
--
-- Intervals that start in the same second and end in the same second are
-- summed together (a backlog submitted at once costs a row per second, not
-- per job), and still exactly: bucket bounds are whole seconds, so within
-- one such set each bound either cuts all of its intervals or none.
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
), clipped AS (
    SELECT group_name, running, greatest(s, $1::timestamptz) AS s, least(e, $3::timestamptz) AS e
      FROM iv
     WHERE least(e, $3::timestamptz) > greatest(s, $1::timestamptz)
), sets AS (
    SELECT group_name, running, date_trunc('second', s) AS s0, date_trunc('second', e) AS e0,
           count(*) AS n, sum(extract(epoch FROM s)) AS sum_s, sum(extract(epoch FROM e)) AS sum_e
      FROM clipped
     GROUP BY 1, 2, 3, 4
), cut AS (
    SELECT group_name, running, n, sum_s, sum_e, s0, e0, b,
           extract(epoch FROM $1::timestamptz) + b * $2::numeric AS b0
      FROM sets,
           generate_series(floor(extract(epoch FROM s0 - $1::timestamptz) / $2::numeric)::int,
                           floor(extract(epoch FROM e0 - $1::timestamptz) / $2::numeric)::int) AS b
)
SELECT group_name, running, b,
       (sum(CASE WHEN b0 + $2::numeric <= extract(epoch FROM e0) THEN n * (b0 + $2::numeric) ELSE sum_e END
          - CASE WHEN b0 > extract(epoch FROM s0) THEN n * b0 ELSE sum_s END) / $2::numeric)::float8
FROM cut
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
