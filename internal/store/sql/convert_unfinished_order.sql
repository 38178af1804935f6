-- The move onto the journal (store.ConvertToJournal): the unfinished jobs
-- and what they depend on, oldest first, for the order in which the
-- journal receives them (a job after the jobs it depends on).
SELECT group_name, id, coalesce(depends_on, '{}')
  FROM fairway_job_row
 WHERE state NOT IN ('success', 'failed', 'cancelled')
 ORDER BY submitted, seq
