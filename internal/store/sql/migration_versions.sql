-- The migrations applied so far.
SELECT version FROM fairway_migration
