-- Each group's slot-time over the last $1: the seconds its jobs ran
-- within the window (ended in it, or running now), and its weight (1
-- without a row), with every group that has a weight of its own even if
-- it ran nothing. A job's last attempt counts (attempts retried since are
-- not kept).
WITH used AS (
    SELECT group_name,
           sum(extract(epoch FROM least(coalesce(finished, now()), now()) - greatest(started, now() - $1::interval)))::float8 AS seconds
      FROM (SELECT group_name, started, finished
              FROM fairway_record_stat
             WHERE started IS NOT NULL
               AND batch_finished >= now() - $1::interval AND finished >= now() - $1::interval
            UNION ALL
            -- The journal engine's running jobs, from its state: group,
            -- started ($2, $3; empty on the row engine).
            SELECT group_name, started, NULL FROM unnest($2::text[], $3::timestamptz[]) AS l (group_name, started)) j
     GROUP BY group_name
)
SELECT coalesce(u.group_name, s.group_name), coalesce(u.seconds, 0), coalesce(s.weight, 1)
  FROM used u
  FULL JOIN (SELECT group_name, weight FROM fairway_group_share WHERE weight <> 1) s ON s.group_name = u.group_name
 ORDER BY 1
