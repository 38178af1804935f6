-- The table of applied migrations.
CREATE TABLE IF NOT EXISTS fairway_migration (
version int PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())
