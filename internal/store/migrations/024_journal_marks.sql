-- The journal's retention (issue 31, docs/journal.md "Retention"): each
-- snapshot of a partition's state leaves a mark, the tail position it
-- covers and when. The leader deletes the rows visible in the newest mark
-- older than the journal's retention (an hour), but the submitted rows of
-- the jobs that have not ended: a coordinator that folded the journal in
-- that hour has read them all, and a new one restores from the last
-- snapshot, which covers them.
CREATE TABLE fairway_journal_mark (
    partition smallint NOT NULL,
    taken     timestamptz NOT NULL DEFAULT clock_timestamp(),
    tail      pg_snapshot NOT NULL,
    PRIMARY KEY (partition, taken)
);
