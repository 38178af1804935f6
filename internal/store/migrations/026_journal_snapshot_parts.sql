-- A journal snapshot in parts (issue 31, condition 6): the leader stores
-- its state as it encodes it, a few MiB at a time, instead of holding the
-- whole encoding (tens of MiB for a million waiting jobs) and pgx's copy
-- of it. The snapshot's row (its tail position, when it was taken) has an
-- empty body, and these are the body's parts, in order; a snapshot and its
-- parts are replaced in one transaction. A snapshot of an earlier build
-- has its body in its row and no parts; it is read as before.
CREATE TABLE fairway_journal_snapshot_part (
    partition smallint NOT NULL,
    part      integer NOT NULL,  -- 1, 2, …: the body's parts in order
    body      bytea NOT NULL,
    PRIMARY KEY (partition, part)
);
DO $$
BEGIN
    ALTER TABLE fairway_journal_snapshot_part ALTER COLUMN body SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this PostgreSQL has no lz4: the snapshot''s parts stay compressed with pglz';
END
$$;
