-- The jobs $2 of group $1 (a graph's nodes, found by Store.Graph's walk),
-- in submission order, from their records through the batches' keys.
SELECT {{job_columns}}
  FROM fairway_records_of($1, $2::text[])
 ORDER BY submitted, id
