-- The rate limits.
SELECT task, group_name, starts, period_ms, updated FROM fairway_rate_limit ORDER BY task, group_name
