-- Removes one batch of finished jobs: state $1, ended more than $2 ago
-- (PostgreSQL's clock), of group $3 ('' for every group), the oldest
-- first, at most $4. Their records leave their batches
-- (fairway_records_drop: a batch whose records all go is deleted, another
-- is written again without them), their log lines go with them, and so do
-- the ids they took (fairway_job_id), so that an id is free again once its
-- job is gone. The batches' arrays say which records to take, without
-- reading the records. Run after journal.RecordsLockSQL, in its
-- transaction: one writer of the batches at a time (another prune, a retry
-- by hand taking a job's record out). Returns how many jobs it removed.
WITH candidates AS (
    SELECT b.id AS batch, u.o
      FROM fairway_record b
     CROSS JOIN LATERAL unnest(b.s_states, b.s_groups) WITH ORDINALITY AS u (state, group_name, o)
     WHERE b.finished < now() - $2::interval AND ($3 = '' OR b.groups @> ARRAY[$3::text])
       AND u.state = $1 AND ($3 = '' OR u.group_name = $3)
     ORDER BY b.finished, b.id, u.o
     LIMIT $4
), removed AS (
    SELECT d.group_name, d.id
      FROM (SELECT batch, array_agg(o) AS gone FROM candidates GROUP BY batch) c
     CROSS JOIN LATERAL fairway_records_drop(c.batch, c.gone) d
), unlogged AS (
    DELETE FROM fairway_job_log l USING removed r WHERE l.group_name = r.group_name AND l.job_id = r.id
), freed AS (
    DELETE FROM fairway_job_id i USING removed r WHERE i.group_name = r.group_name AND i.id = r.id
)
SELECT count(*) FROM removed
