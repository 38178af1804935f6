-- A new database's first coordinator chooses store.EngineNew when it names
-- no engine (coordinator.engine empty). A database that already holds jobs
-- and never recorded an engine held them on the row engine (the only one
-- before migration 021's choice): record it, so that its jobs keep
-- running where they are stored, whatever EngineNew becomes.
INSERT INTO fairway_engine (engine)
SELECT 'rows' WHERE EXISTS (SELECT 1 FROM fairway_job)
ON CONFLICT DO NOTHING;
