-- The log lines of job $1 in group $2, in order.
SELECT group_name, job_id, attempt, time, level, message FROM fairway_job_log
WHERE group_name = $2 AND job_id = $1 ORDER BY id
