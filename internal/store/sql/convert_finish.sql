-- The move onto the journal (store.ConvertToJournal), once the unfinished
-- jobs are in the journal: every job's id is taken for good (the journal
-- de-duplicates submissions by fairway_job_id), the unfinished rows go
-- (fairway_job keeps the records of ended jobs only; their log lines stay,
-- the foreign key dropped before), and the database's engine is the
-- journal.
WITH ids AS (
    INSERT INTO fairway_job_id (group_name, id) SELECT group_name, id FROM fairway_job ON CONFLICT DO NOTHING
), gone AS (
    DELETE FROM fairway_job WHERE state NOT IN ('success', 'failed', 'cancelled')
)
INSERT INTO fairway_engine (engine) VALUES ('journal')
ON CONFLICT (only_row) DO UPDATE SET engine = 'journal', chosen = now()
