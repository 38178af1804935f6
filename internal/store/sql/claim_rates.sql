-- The rate limits, read under the fairness lock with the concurrency
-- limits (see rates.go).
SELECT task, group_name, starts, period_ms FROM fairway_rate_limit
