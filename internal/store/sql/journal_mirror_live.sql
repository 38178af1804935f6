-- The unfinished jobs, as CheckJournalMirror compares them with the fold
-- of the journal.
SELECT group_name, id, task, state, attempt, retries, max_retries, priority,
       coalesce(worker, ''), worker_instance, progress, cancel_requested
  FROM fairway_job
 WHERE state NOT IN ('success', 'failed', 'cancelled')
