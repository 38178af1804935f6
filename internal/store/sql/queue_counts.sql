-- The jobs not yet final, per group, task and state, with the age in
-- seconds of the oldest due waiting or stuck one (0 if none is due); the
-- $1 largest counts; $2: one group, or '' for all.
SELECT group_name, task, state, count(*),
       coalesce(extract(epoch FROM now() - min(run_at) FILTER (WHERE state IN ('waiting', 'stuck') AND run_at <= now())), 0)::float8
FROM fairway_job_row
WHERE state IN ('pending', 'waiting', 'stuck', 'scheduled', 'running') AND ($2::text = '' OR group_name = $2::text)
GROUP BY group_name, task, state
ORDER BY count(*) DESC
LIMIT $1
