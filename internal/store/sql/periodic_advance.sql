-- Sets the next run of periodic task $1 to $2 and releases it.
UPDATE fairway_periodic_task SET nextrun = $2, worker = NULL, marked = NULL WHERE id = $1
