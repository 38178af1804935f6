-- An executor's state: live while it sends heartbeats; gone once the
-- coordinators' sweep found it silent for several leases (it died, or is
-- cut off); deregistered when it shut down gracefully and said so. Rows
-- are kept: a task that some executor once registered is still accepted on
-- submit (with a warning while no live executor runs it), one that none
-- ever registered is refused. left_at is when it stopped being live.
ALTER TABLE fairway_executor
    ADD COLUMN state text NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'gone', 'deregistered')),
    ADD COLUMN left_at timestamptz;
