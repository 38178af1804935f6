-- The journal engine's log (issue 31, docs/journal.md), step 1: the table
-- and the leader's fenced lease per partition. Nothing writes it yet.

-- One row per batch, appended, never updated. xid is the writing
-- transaction's: the tail reads a row at the first read whose snapshot
-- sees its transaction ended, in id order (internal/journal.Tail), so
-- that a row is never read before its commit, and read once. The order
-- of ids is the order in time of the statements that took them because
-- the identity's sequence caches one value (CACHE 1, said here so that no
-- one raises it).
CREATE TABLE fairway_journal (
    id        bigint GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
    xid       xid8 NOT NULL DEFAULT pg_current_xact_id(),
    partition smallint NOT NULL DEFAULT 0,
    epoch     bigint NOT NULL DEFAULT 0,  -- the leader's fencing epoch; 0: any coordinator's append
    kind      text NOT NULL,
    at        timestamptz NOT NULL DEFAULT now(),
    body      bytea NOT NULL
);
CREATE INDEX fairway_journal_tail ON fairway_journal (partition, xid, id);

-- Each partition's leader: a lease on PostgreSQL's clock whose epoch
-- grows with each new holder. The leader's appends check their epoch in
-- their own statement (internal/journal.AppendFenced): a deposed
-- leader's rows are refused.
CREATE TABLE fairway_journal_lease (
    partition smallint PRIMARY KEY,
    holder    text NOT NULL,
    epoch     bigint NOT NULL,
    until     timestamptz NOT NULL
);
