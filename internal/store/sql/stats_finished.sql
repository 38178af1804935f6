-- The jobs that ended since $1, per bucket of $2 seconds (its index from
-- $1), group, task and final state; $3: one group, or '' for all; at most
-- $4 rows. Served by fairway_record_finished (a batch ends after its
-- records: batch_finished >= finished).
SELECT floor(date_part('epoch', finished - $1::timestamptz) / $2::float8)::int, group_name, task, state, count(*)
FROM fairway_record_stat
WHERE batch_finished >= $1::timestamptz AND finished >= $1::timestamptz AND ($3::text = '' OR group_name = $3::text)
GROUP BY 1, 2, 3, 4
ORDER BY 1, 2, 3, 4
LIMIT $4
