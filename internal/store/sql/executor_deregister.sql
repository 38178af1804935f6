-- Marks executor $1 (instance $2) deregistered: it left on purpose.
UPDATE fairway_executor
SET state = 'deregistered', left_at = CASE WHEN state = 'deregistered' THEN left_at ELSE now() END, running = 0
WHERE app_id = $1 AND instance = $2
