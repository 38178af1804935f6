-- Per group and bucket of $2 seconds from $1 to $3 (PostgreSQL's now), the
-- average number of the group's jobs running and waiting in the bucket. A
-- job's last attempt is running from its start to its end (or now); a job
-- is waiting from its due time (submitted, or the run_at it was delayed to
-- or retried at) to its start, its end without a start, or now while it
-- waits. $4: one group, or '' for all. Columns: group, running (else
-- waiting), bucket index, average jobs. On the journal engine, whose
-- unfinished jobs are not rows, $5..$11 are their sets (StatsLive).
--
-- One scan gives both intervals of a job, in seconds from $1. Intervals
-- that start in the same bucket and end in the same bucket are summed
-- together (a month of history costs a row per bucket, a backlog submitted
-- at once a row per pair of buckets, not per job), and still exactly: a
-- set's first bucket gets n times its end bound less the sum of starts, its
-- last the sum of ends less n times its start bound, and the buckets
-- between n whole buckets each.
WITH j AS (
    SELECT group_name, state, started, finished, due
      FROM fairway_record_stat
     WHERE ($4::text = '' OR group_name = $4::text)
       AND batch_finished >= $1::timestamptz AND finished >= $1::timestamptz
), iv AS (
    SELECT group_name, v.running,
           date_part('epoch', greatest(v.s, $1::timestamptz) - $1::timestamptz) AS s,
           date_part('epoch', least(v.e, $3::timestamptz) - $1::timestamptz) AS e
      FROM j CROSS JOIN LATERAL (VALUES
           -- Waiting or stuck again: its start is an earlier attempt's.
           (true, CASE WHEN j.state NOT IN ('waiting', 'stuck') THEN j.started END, coalesce(j.finished, $3::timestamptz)),
           (false, j.due, CASE WHEN j.state IN ('waiting', 'stuck') THEN $3::timestamptz
                               ELSE coalesce(j.started, j.finished, $3::timestamptz) END)) AS v(running, s, e)
     WHERE v.s IS NOT NULL
), sets AS (
    SELECT group_name, running, floor(s / $2::float8)::int AS bs, floor(e / $2::float8)::int AS be,
           count(*) AS n, sum(s) AS sum_s, sum(e) AS sum_e
      FROM iv
     WHERE e > s
     GROUP BY 1, 2, 3, 4
    UNION ALL
    -- The journal engine's unfinished jobs, from its state, summed the
    -- same way ($5..$11; empty on the row engine).
    SELECT * FROM unnest($5::text[], $6::bool[], $7::int[], $8::int[], $9::bigint[], $10::float8[], $11::float8[])
)
SELECT group_name, running, b,
       sum(CASE WHEN b < be THEN n * (b + 1) * $2::float8 ELSE sum_e END
         - CASE WHEN b > bs THEN n * b * $2::float8 ELSE sum_s END) / $2::float8
FROM sets, generate_series(bs, be) AS b
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
