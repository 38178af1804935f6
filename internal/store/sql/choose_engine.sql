-- Records $1 as the database's engine unless one is recorded already, and
-- returns the one recorded (migration 021).
WITH ins AS (
    INSERT INTO fairway_engine (engine) VALUES ($1) ON CONFLICT DO NOTHING RETURNING engine, chosen)
SELECT engine, chosen FROM ins
UNION ALL
SELECT engine, chosen FROM fairway_engine
LIMIT 1
