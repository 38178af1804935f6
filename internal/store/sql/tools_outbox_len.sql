-- The events written and not yet published: the outbox's length.
SELECT count(*) FROM fairway_event
