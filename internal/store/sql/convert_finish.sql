-- The move onto the journal (store.ConvertToJournal), once the unfinished
-- jobs are in the journal: every job's id is taken for good (the journal
-- de-duplicates submissions by fairway_job_id), the unfinished rows go,
-- and the database's engine is the journal. The ended ones (a job
-- cancelled by convert_cancel_requested.sql) become records after it
-- (fairway_move_job_rows, migration 027; their log lines stay).
WITH ids AS (
    INSERT INTO fairway_job_id (group_name, id) SELECT group_name, id FROM fairway_job_row ON CONFLICT DO NOTHING
), gone AS (
    DELETE FROM fairway_job_row WHERE state NOT IN ('success', 'failed', 'cancelled')
)
INSERT INTO fairway_engine (engine) VALUES ('journal')
ON CONFLICT (only_row) DO UPDATE SET engine = 'journal', chosen = now()
