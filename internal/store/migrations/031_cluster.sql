-- Issue 34: the cluster's partitions, fixed when it is created, since a
-- group's partition is a hash of its name modulo their count
-- (internal/partition). The home database (database.url) records the
-- count and a random id at the first coordinator's start or 'fairway
-- migrate'; each other database of the partitions map records the same
-- id and count, so that a database of another cluster, or a count
-- changed since, is refused. One row.
CREATE TABLE fairway_cluster (
    only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    id         text NOT NULL,
    partitions integer NOT NULL CHECK (partitions BETWEEN 1 AND 1024),
    home       boolean NOT NULL, -- database.url's, rather than a partition's of the map
    here       smallint[] NOT NULL DEFAULT '{0}', -- the partitions whose journal is here, as the last start recorded them
    chosen     timestamptz NOT NULL DEFAULT now()
);

-- A database that holds jobs already was created with one partition.
INSERT INTO fairway_cluster (id, partitions, home)
SELECT gen_random_uuid()::text, 1, true
WHERE EXISTS (SELECT FROM fairway_journal_lease)
   OR EXISTS (SELECT FROM fairway_journal)
   OR EXISTS (SELECT FROM fairway_job);
