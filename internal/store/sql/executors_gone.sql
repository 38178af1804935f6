-- Marks gone the live executors silent since before now() - $1.
UPDATE fairway_executor SET state = 'gone', left_at = now(), running = 0
WHERE state = 'live' AND last_heartbeat < now() - $1::interval
RETURNING app_id, instance, host, tasks, last_heartbeat
