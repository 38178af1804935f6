-- Which of the JSON documents $1 PostgreSQL cannot store as jsonb (or $2
-- says cannot even be sent as text): their 0-based positions.
SELECT d.ord - 1 FROM unnest($1::text[], $2::bool[]) WITH ORDINALITY AS d (doc, sendable, ord)
WHERE NOT d.sendable OR (d.doc <> '' AND NOT fairway_jsonb_ok(d.doc))
