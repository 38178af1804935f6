-- The database's engine, if a coordinator chose one (migration 021).
SELECT engine FROM fairway_engine
