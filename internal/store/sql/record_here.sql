-- Records which partitions' journals are in this database (migration
-- 031), as the coordinators' start found them.
UPDATE fairway_cluster SET here = $1::smallint[]
