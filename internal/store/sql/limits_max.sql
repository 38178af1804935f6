-- The concurrency limits as operators set them, without the held counts
-- (limits_list.sql): what the journal engine's leader claims by, the held
-- jobs counted by its state.
SELECT kind, name, max_running FROM fairway_limit ORDER BY kind, name
