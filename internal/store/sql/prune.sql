-- Removes one batch of finished jobs: state $1, ended more than $2 ago
-- (PostgreSQL's clock), of group $3 ('' for every group), oldest first, at
-- most $4. Their log lines go with them (deleted here: on the journal
-- engine they have no foreign key), and on the journal engine the ids they
-- took (fairway_job_id), so that an id is free again once its job is
-- gone, as on the row engine. Rows another
-- transaction holds are skipped, and batches are small, so pruning never
-- holds long locks. A job that a blocked job (pending, with depends_on)
-- names stays: its end decides that job's fate. Returns how many jobs it
-- removed. Their rows in fairway_job_order go too.
WITH doomed AS (
    SELECT group_name, id, seq FROM fairway_job
     WHERE state = $1 AND finished < now() - $2::interval AND ($3 = '' OR group_name = $3)
       AND NOT EXISTS (SELECT 1 FROM fairway_job d
                        WHERE d.depends_on @> ARRAY[fairway_job.id] AND d.depends_on IS NOT NULL
                          AND d.group_name = fairway_job.group_name AND d.state = 'pending')
     ORDER BY finished
     LIMIT $4
       FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM fairway_job j USING doomed d
     WHERE j.group_name = d.group_name AND j.id = d.id
    RETURNING 1
), unlisted AS (
    DELETE FROM fairway_job_order o USING doomed d WHERE o.seq = d.seq
), unlogged AS (
    DELETE FROM fairway_job_log l USING doomed d WHERE l.group_name = d.group_name AND l.job_id = d.id
), freed AS (
    DELETE FROM fairway_job_id i USING doomed d WHERE i.group_name = d.group_name AND i.id = d.id
)
SELECT count(*) FROM gone
