-- Sets a rate limit: $1 task ('' any), $2 group ('' the cluster, '*' each
-- group), $3 starts per $4 milliseconds. Its buckets are left as they are:
-- a lower limit caps them when they are next read.
INSERT INTO fairway_rate_limit (task, group_name, starts, period_ms) VALUES ($1, $2, $3, $4)
    ON CONFLICT (task, group_name) DO UPDATE SET starts = excluded.starts, period_ms = excluded.period_ms, updated = now()
