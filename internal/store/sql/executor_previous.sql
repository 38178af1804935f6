-- The row of executor $1 as it was before this registration, locked.
SELECT app_id, instance, host, slots, tasks, started, last_heartbeat, state
FROM fairway_executor WHERE app_id = $1 FOR UPDATE
