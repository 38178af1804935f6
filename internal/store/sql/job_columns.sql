-- The columns scanJob reads, in its order.
id, task, group_name, args, subject, submitter, priority, coalesce(tracker, ''), state,
retries, max_retries, attempt, run_at, expires_at, depends_on, progress, coalesce(worker, ''),
lease_until, submitted, started, finished, result, coalesce(error, ''), trigger_after,
coalesce(traceparent, ''), coalesce(timeout_ms, 0)
