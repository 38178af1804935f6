-- The cluster's partition count, and the partitions whose journal is in
-- this database (migration 031).
SELECT partitions, here FROM fairway_cluster
