-- Records the database as one of cluster $1 of $2 partitions ($3: its
-- home database) unless it recorded one already, and returns the one
-- recorded (migration 031).
WITH ins AS (
    INSERT INTO fairway_cluster (id, partitions, home) VALUES ($1, $2, $3)
    ON CONFLICT DO NOTHING RETURNING id, partitions, home, chosen)
SELECT id, partitions, home, chosen FROM ins
UNION ALL
SELECT id, partitions, home, chosen FROM fairway_cluster
LIMIT 1
