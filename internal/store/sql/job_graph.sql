-- The jobs $2 of group $1 (a graph's nodes, found by Store.Graph's walk),
-- in submission order. Key look-ups in fairway_job_pkey.
SELECT {{job_columns}}
  FROM fairway_job
 WHERE group_name = $1 AND id = ANY ($2::text[])
 ORDER BY submitted, id
