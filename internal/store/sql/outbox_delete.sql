-- Deletes published outbox events ($1: their ids).
DELETE FROM fairway_event WHERE id = ANY ($1)
