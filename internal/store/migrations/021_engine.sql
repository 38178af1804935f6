-- The engine that stores this database's jobs (coordinator.engine): rows
-- (a job's row in fairway_job is its queue entry and its record) or
-- journal (the waiting queue in the partition leader's memory,
-- fairway_journal its log; docs/journal.md). The first coordinator to
-- start on the database chooses it; a coordinator configured with the
-- other is refused at its start, since neither engine sees the other's
-- unfinished jobs; and store.InsertTx stores a caller's jobs the way the
-- database's engine reads them. One row.
CREATE TABLE fairway_engine (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    engine   text NOT NULL CHECK (engine IN ('rows', 'journal')),
    chosen   timestamptz NOT NULL DEFAULT now()
);
