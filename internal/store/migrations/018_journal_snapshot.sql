-- The journal engine (issue 31, docs/journal.md), step 1: a partition's
-- state as of a tail position, so that a new leader folds only the rows
-- after it. One row per partition, replaced by each snapshot.
CREATE TABLE fairway_journal_snapshot (
    partition smallint PRIMARY KEY,
    tail      pg_snapshot NOT NULL,  -- the tail's position: the rows of every transaction ended in it are in the state
    taken     timestamptz NOT NULL DEFAULT now(),
    body      bytea NOT NULL
);
