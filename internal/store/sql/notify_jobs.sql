-- Tells the coordinators (LISTEN fairway_jobs) that jobs were stored
-- outside them, in a caller's transaction: delivered when it commits,
-- never when it rolls back.
SELECT pg_notify('fairway_jobs', '')
