-- Sets limit ($1 kind, $2 name) to $3.
INSERT INTO fairway_limit (kind, name, max_running) VALUES ($1, $2, $3)
ON CONFLICT (kind, name) DO UPDATE SET max_running = excluded.max_running, updated = now()
