-- Appends log lines (arrays of groups, job ids, attempts, times, levels,
-- messages) of attempts the caller checked: on the journal engine, held
-- now by the instance that sent them, as the partition's state says
-- (a running job has no record there to check against).
INSERT INTO fairway_job_log (group_name, job_id, attempt, time, level, message)
SELECT l.group_name, l.id, l.attempt, l.time, l.level, l.message
  FROM unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[], $5::text[], $6::text[])
       WITH ORDINALITY AS l (group_name, id, attempt, time, level, message, ord)
 ORDER BY l.ord
