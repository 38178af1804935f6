-- Removes limit ($1 kind, $2 name).
DELETE FROM fairway_limit WHERE kind = $1 AND name = $2
