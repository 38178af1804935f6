-- Registers executor $1 (instance $2, host $3, $4 slots, tasks $5): a
-- new row, or its old one made live again. The same instance registering
-- again (its tasks or slots changed while it runs) keeps its start.
INSERT INTO fairway_executor (app_id, instance, host, slots, tasks, started, last_heartbeat)
VALUES ($1, $2, $3, $4, $5, now(), now())
ON CONFLICT (app_id) DO UPDATE SET instance = $2, host = $3, slots = $4, tasks = $5,
	started = CASE WHEN fairway_executor.instance = $2 THEN fairway_executor.started ELSE now() END,
	last_heartbeat = now(), running = 0, state = 'live', left_at = NULL
