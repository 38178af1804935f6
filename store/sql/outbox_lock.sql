-- One outbox publisher at a time across coordinators ($1: the lock key).
SELECT pg_try_advisory_xact_lock($1)
