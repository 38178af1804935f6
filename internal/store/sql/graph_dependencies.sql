-- A step up a job's graph: the depends_on of the jobs $2 of group $1
-- (their dependencies), from their records through the batches' keys.
SELECT id, coalesce(depends_on, '{}') FROM fairway_records_of($1, $2::text[])
