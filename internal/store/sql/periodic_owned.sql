-- Whether coordinator $2 still owns periodic task $1 (locks it).
SELECT coalesce(worker = $2, false) FROM fairway_periodic_task WHERE id = $1 FOR UPDATE
