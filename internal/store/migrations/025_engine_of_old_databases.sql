-- A new database's first coordinator now chooses the journal when it
-- names no engine (store.EngineNew). A database that already holds jobs
-- and never recorded an engine held them on the row engine (the only one
-- before migration 021's choice): record it, so that its jobs keep
-- running where they are stored.
INSERT INTO fairway_engine (engine)
SELECT 'rows' WHERE EXISTS (SELECT 1 FROM fairway_job)
ON CONFLICT DO NOTHING;
