-- The jobs of group $1 submitted before $2 and at or after it.
SELECT count(*) FILTER (WHERE submitted < $2), count(*) FILTER (WHERE submitted >= $2)
  FROM fairway_job WHERE group_name = $1
