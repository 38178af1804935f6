-- The earliest next run of an enabled periodic task.
SELECT min(nextrun) FROM fairway_periodic_task WHERE enabled
