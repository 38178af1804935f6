-- Records a heartbeat of executor $1 (instance $2), $3 jobs running.
UPDATE fairway_executor SET last_heartbeat = now(), running = $3
WHERE app_id = $1 AND instance = $2 AND state = 'live'
