-- Of the submitted ($1 groups, $2 ids), those already stored.
SELECT j.group_name, j.id FROM unnest($1::text[], $2::text[]) AS m (group_name, id)
JOIN fairway_job j ON j.group_name = m.group_name AND j.id = m.id
