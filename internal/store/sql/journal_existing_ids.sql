-- Of the named ($1 groups, $2 ids), those a committed submission took on
-- the journal engine (fairway_job_id: live jobs and ended ones until
-- retention frees them), as insert_existing_ids.sql finds stored jobs on
-- the row engine.
SELECT i.group_name, i.id FROM unnest($1::text[], $2::text[]) AS m (group_name, id)
JOIN fairway_job_id i ON i.group_name = m.group_name AND i.id = m.id
