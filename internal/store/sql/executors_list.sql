-- Every executor known, live first.
SELECT app_id, instance, host, slots, running, tasks, started, last_heartbeat, state, left_at
FROM fairway_executor ORDER BY state = 'live' DESC, last_heartbeat DESC
