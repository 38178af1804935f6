-- The move onto the journal (store.ConvertToJournal): the unfinished jobs
-- named by $1 (groups) and $2 (ids), with what a journal item holds of
-- each (times in microseconds since the epoch).
SELECT j.group_name, j.id, j.task, j.priority, j.args::text, j.subject, j.submitter, coalesce(j.tracker, ''),
       coalesce(j.traceparent, ''), coalesce(j.timeout_ms, 0), j.max_retries, j.attempt, j.state,
       (extract(epoch FROM j.run_at) * 1e6)::bigint,
       coalesce((extract(epoch FROM j.expires_at) * 1e6)::bigint, 0),
       coalesce(j.depends_on, '{}'),
       coalesce((extract(epoch FROM j.trigger_after) * 1e6)::bigint, 0),
       (extract(epoch FROM j.submitted) * 1e6)::bigint
  FROM unnest($1::text[], $2::text[]) AS r (group_name, id)
  JOIN fairway_job_row j ON j.group_name = r.group_name AND j.id = r.id
 WHERE j.state NOT IN ('success', 'failed', 'cancelled')
