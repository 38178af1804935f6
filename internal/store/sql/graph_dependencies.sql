-- A step up a job's graph: the depends_on of the jobs $2 of group $1
-- (their dependencies). Key look-ups in fairway_job_pkey.
SELECT id, coalesce(depends_on, '{}') FROM fairway_job WHERE group_name = $1 AND id = ANY ($2::text[])
