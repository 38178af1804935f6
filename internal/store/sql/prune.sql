-- Removes one batch of finished jobs: state $1, ended more than $2 ago
-- (PostgreSQL's clock), of group $3 ('' for every group), the oldest
-- first, at most $4. Their records leave their batches (fairway_record: a
-- batch whose records all go is deleted, another is written again without
-- them), their log lines go with them, and so do the ids they took
-- (fairway_job_id), so that an id is free again once its job is gone.
-- Run after journal.RecordsLockSQL, in its transaction: one writer of
-- the batches at a time (another prune, a retry by hand taking a job's
-- record out). Returns how many jobs it removed.
WITH candidates AS (
    SELECT b.id AS batch, x.o
      FROM fairway_record b
     CROSS JOIN LATERAL jsonb_array_elements(b.jobs) WITH ORDINALITY AS x (e, o)
     WHERE b.finished < now() - $2::interval AND ($3 = '' OR b.groups @> ARRAY[$3::text])
       AND x.e->>'state' = $1 AND ($3 = '' OR x.e->>'group_name' = $3)
     ORDER BY b.finished, b.id, x.o
     LIMIT $4
), jobs AS (
    SELECT b.id AS batch, x.e, x.o, EXISTS (SELECT 1 FROM candidates c WHERE c.batch = b.id AND c.o = x.o) AS gone
      FROM fairway_record b
     CROSS JOIN LATERAL jsonb_array_elements(b.jobs) WITH ORDINALITY AS x (e, o)
     WHERE b.id IN (SELECT batch FROM candidates)
), emptied AS (
    DELETE FROM fairway_record b
     USING (SELECT batch FROM jobs GROUP BY batch HAVING bool_and(gone)) k
     WHERE b.id = k.batch
), rewritten AS (
    UPDATE fairway_record b SET jobs = k.jobs
      FROM (SELECT batch, jsonb_agg(e ORDER BY o) FILTER (WHERE NOT gone) AS jobs FROM jobs GROUP BY batch HAVING NOT bool_and(gone)) k
     WHERE b.id = k.batch
), removed AS (
    SELECT e->>'group_name' AS group_name, e->>'id' AS id FROM jobs WHERE gone
), unlogged AS (
    DELETE FROM fairway_job_log l USING removed r WHERE l.group_name = r.group_name AND l.job_id = r.id
), freed AS (
    DELETE FROM fairway_job_id i USING removed r WHERE i.group_name = r.group_name AND i.id = r.id
)
SELECT count(*) FROM removed
