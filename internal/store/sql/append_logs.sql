-- Appends log lines (arrays of groups, job ids, attempts, times, levels,
-- messages) to jobs that exist (their records).
INSERT INTO fairway_job_log (group_name, job_id, attempt, time, level, message)
SELECT l.group_name, l.id, l.attempt, l.time, l.level, l.message
  FROM unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::text[])
       WITH ORDINALITY AS l (group_name, id, attempt, time, level, message, worker, instance, ord)
 WHERE EXISTS (SELECT 1 FROM fairway_records_of(l.group_name, ARRAY[l.id]) j
                 WHERE j.attempt = l.attempt AND j.worker_instance = l.instance AND coalesce(j.worker, l.worker) = l.worker)
 ORDER BY l.ord
