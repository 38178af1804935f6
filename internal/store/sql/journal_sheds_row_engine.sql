-- A database on the journal engine (docs/journal.md) keeps in fairway_job
-- the records of ended jobs only: the row engine's indexes of unfinished
-- jobs (partial indexes on the states pending, waiting, stuck, scheduled
-- and running) stay empty there, and each record's insert evaluates all
-- their predicates. They make way for one empty index of every unfinished
-- state, fairway_job_live, one predicate per insert, so that the row
-- engine's statements that look for unfinished jobs (the gauges' shares,
-- the limits' held counts, a periodic task's live job) still find nothing
-- without reading every record, and two indexes to list the records by.
-- The primary key, fairway_job_finished
-- (retention, stats) and fairway_job_dependents (graphs) stay. The log
-- lines of a job are kept while it runs, before its record exists: their
-- foreign key to fairway_job goes (retention deletes them with the record,
-- prune.sql). Run by
-- store.ChooseEngine once the database's engine is the journal, when
-- journal_shed_needed.sql finds something left to do (IF EXISTS and IF NOT
-- EXISTS make a second run, by two coordinators starting together, a
-- no-op).
-- One coordinator at a time: two running this DDL together deadlocked.
-- The statements below run in one implicit transaction, which holds the
-- lock until its end.
SELECT pg_advisory_xact_lock(hashtext('fairway: the journal sheds the row engine'));
CREATE INDEX IF NOT EXISTS fairway_job_live ON fairway_job (state)
    WHERE state NOT IN ('success', 'failed', 'cancelled');
-- The records are listed newest ended first (store.ListRecords), by the
-- seq each takes when it is written: a record is written once, so these
-- cost an entry each, where the row engine keeps fairway_job_order apart
-- from rows it updates at every change.
CREATE INDEX IF NOT EXISTS fairway_job_seq ON fairway_job (seq);
CREATE INDEX IF NOT EXISTS fairway_job_group_seq ON fairway_job (group_name, seq);
DROP INDEX IF EXISTS fairway_job_eligible, fairway_job_stuck, fairway_job_held, fairway_job_trigger,
    fairway_job_expiry, fairway_job_tracker, fairway_job_pending, fairway_job_blocked;
ALTER TABLE fairway_job_log DROP CONSTRAINT IF EXISTS fairway_job_log_job_fkey;
