-- The journal engine (issue 31, docs/journal.md): the journal is the
-- events' outbox. The partition's leader publishes the events of the rows
-- it folds, then records here the tail position they reach: a successor
-- publishes again only the events of rows this position does not cover.
ALTER TABLE fairway_journal_lease ADD COLUMN published pg_snapshot;
