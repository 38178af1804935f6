-- A page of the log lines of job $2 in group $1: at most $5 after cursor
-- $3, messages cut at $4 characters, with their full length in bytes.
SELECT id, group_name, job_id, attempt, time, level, left(message, $4), octet_length(message)
FROM fairway_job_log WHERE group_name = $1 AND job_id = $2 AND id > $3 ORDER BY id LIMIT $5
