-- Serialises migrations across processes ($1: the lock key).
SELECT pg_advisory_xact_lock($1)
