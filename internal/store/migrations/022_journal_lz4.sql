-- The journal's bodies compressed with lz4 rather than pglz (issue 31,
-- docs/performance.md "What PostgreSQL spends a drained job on"): a body
-- (a batch of submissions, claims or reports; a snapshot of the leader's
-- state) is larger than TOAST's 2 kB threshold and is compressed on every
-- insert. pglz took about a tenth of PostgreSQL's CPU in a drain, lz4 a
-- fraction of it, for a like size. A server built without lz4 keeps
-- pglz: the bodies are the same, only their compression differs.
DO $$
BEGIN
    ALTER TABLE fairway_journal ALTER COLUMN body SET COMPRESSION lz4;
    ALTER TABLE fairway_journal_snapshot ALTER COLUMN body SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this PostgreSQL has no lz4: the journal''s bodies stay compressed with pglz';
END
$$;
