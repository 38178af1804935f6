-- One outbox publisher at a time across coordinators ($1: the lock key),
-- taken before the read (see Store.PublishEvents).
SELECT pg_try_advisory_xact_lock($1)
