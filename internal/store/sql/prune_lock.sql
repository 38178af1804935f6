-- One prune at a time (prune.sql rewrites the batches it takes records
-- out of), until the transaction ends.
SELECT pg_advisory_xact_lock(hashtext('fairway: prune'))
