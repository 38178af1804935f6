-- Submissions refused (invalid, over a quota, depending on a job never
-- submitted, args PostgreSQL cannot store): a rejected event each, in the
-- outbox, and no job.
INSERT INTO fairway_event (job_id, group_name, task, state, error, code, field)
SELECT r.id, r.group_name, r.task, 'rejected', r.error, r.code, r.field
  FROM unnest(@rejected_id::text[], @rejected_group::text[], @rejected_task::text[], @rejected_error::text[],
              @rejected_code::text[], @rejected_field::text[])
       WITH ORDINALITY AS r (id, group_name, task, error, code, field, ord)
 ORDER BY r.ord
