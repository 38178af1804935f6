-- The journal engine (issue 31, docs/journal.md), step 1: a partition's
-- state as of a tail position, so that a new leader folds only the rows
-- after it. One row per partition, replaced by each snapshot.
CREATE TABLE fairway_journal_snapshot (
    partition smallint PRIMARY KEY,
    tail_from xid8 NOT NULL,  -- every row of a transaction below it is in the state
    taken     timestamptz NOT NULL DEFAULT now(),
    body      bytea NOT NULL
);
