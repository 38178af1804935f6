-- Whether journal_sheds_row_engine.sql has anything left to do here: its
-- DDL takes locks on fairway_job and fairway_job_log even when there is
-- nothing to create or drop, so a coordinator's start runs it only when
-- this says so (a database that became the journal's, or one from before
-- a change of that file).
SELECT to_regclass('fairway_job_live') IS NULL
    OR to_regclass('fairway_job_seq') IS NULL
    OR to_regclass('fairway_job_group_seq') IS NULL
    OR EXISTS (SELECT 1 FROM pg_indexes
                WHERE tablename = 'fairway_job' AND schemaname = current_schema()
                  AND indexname IN ('fairway_job_eligible', 'fairway_job_stuck', 'fairway_job_held', 'fairway_job_trigger',
                                    'fairway_job_expiry', 'fairway_job_tracker', 'fairway_job_pending', 'fairway_job_blocked'))
    OR EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'fairway_job_log_job_fkey'
                  AND conrelid = to_regclass('fairway_job_log'))
