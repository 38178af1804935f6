-- Deletes periodic task $1.
DELETE FROM fairway_periodic_task WHERE id = $1
