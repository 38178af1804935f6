-- One batch of :n jobs through its life: submitted, claimed, ended (each a
-- transaction of its own, as the three would be), the job rows written at
-- the end.
\set b random(1, 1000000000)
BEGIN;
INSERT INTO sketch_journal (epoch, kind, job_ids, groups, tasks, args)
SELECT 1, 'submitted', array_agg(:b || '-' || i), array_agg('g' || (i % 10)), array_agg('work'::text), array_agg('{}'::jsonb)
  FROM generate_series(1, :n) i;
COMMIT;
BEGIN;
INSERT INTO sketch_journal (epoch, kind, worker, job_ids, groups)
SELECT 1, 'scheduled', 'bench-1', array_agg(:b || '-' || i), array_agg('g' || (i % 10)) FROM generate_series(1, :n) i;
COMMIT;
BEGIN;
INSERT INTO sketch_journal (epoch, kind, worker, job_ids, groups, outcomes)
SELECT 1, 'ended', 'bench-1', array_agg(:b || '-' || i), array_agg('g' || (i % 10)), array_agg('success'::text) FROM generate_series(1, :n) i;
INSERT INTO sketch_job (group_name, id, task, args, state, attempt, worker, submitted, started, finished)
SELECT 'g' || (i % 10), :b || '-' || i, 'work', '{}', 'success', 1, 'bench-1', now(), now(), now() FROM generate_series(1, :n) i;
COMMIT;
