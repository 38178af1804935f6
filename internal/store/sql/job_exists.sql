-- Whether job $2 of group $1 has a record.
SELECT EXISTS (SELECT 1 FROM fairway_records_of($1, ARRAY[$2::text]))
