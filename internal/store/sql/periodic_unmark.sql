-- Releases periodic task $1 held by coordinator $2, with next run $3 and
-- enabled $4.
UPDATE fairway_periodic_task SET worker = NULL, marked = NULL, nextrun = $3, enabled = $4
WHERE id = $1 AND worker = $2
