-- The partitions whose journal lives in this database: led here (a
-- lease), restored from here (a snapshot), or with rows here (read by a
-- loose scan of the tail's index, one probe per partition; migrations
-- 017 and 018).
WITH RECURSIVE rows AS (
    (SELECT partition FROM fairway_journal ORDER BY partition LIMIT 1)
    UNION ALL
    SELECT (SELECT j.partition FROM fairway_journal j WHERE j.partition > rows.partition ORDER BY j.partition LIMIT 1)
    FROM rows WHERE rows.partition IS NOT NULL
)
SELECT partition FROM rows WHERE partition IS NOT NULL
UNION
SELECT partition FROM fairway_journal_lease
UNION
SELECT partition FROM fairway_journal_snapshot
ORDER BY 1
