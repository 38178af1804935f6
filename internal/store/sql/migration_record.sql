-- Records migration $1 ($2: its name) as applied.
INSERT INTO fairway_migration (version, name) VALUES ($1, $2)
