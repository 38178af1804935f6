-- Frees what the pruned jobs ($1 groups, $2 ids: prune.sql's answer) held
-- beside their records: their log lines, and the ids they took
-- (fairway_job_id), so that an id is free again once its job is gone. One
-- index probe a job in each table.
WITH gone AS (
    SELECT * FROM unnest($1::text[], $2::text[]) AS g (group_name, id)
), unlogged AS (
    DELETE FROM fairway_job_log l USING gone g WHERE l.group_name = g.group_name AND l.job_id = g.id
)
DELETE FROM fairway_job_id i USING gone g WHERE i.group_name = g.group_name AND i.id = g.id
