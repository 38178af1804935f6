-- The tools' count of the jobs whose id starts with $1 (all of them for '').
SELECT count(*) FROM fairway_job WHERE starts_with(id, $1)
