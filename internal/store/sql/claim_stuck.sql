-- Up to n due stuck jobs of each group, oldest first. Not locked (see
-- claim_waiting.sql).
-- $1: groups, $2: how many of each, $3: tasks.
SELECT c.id, c.group_name, c.priority, c.task
  FROM unnest($1::text[], $2::int[]) AS g (name, n)
 CROSS JOIN LATERAL (
       SELECT j.id, j.group_name, j.priority, j.task
         FROM fairway_job j
        WHERE j.group_name = g.name AND j.state = 'stuck'
          AND j.run_at <= now() AND j.task = ANY ($3::text[])
        -- Matches fairway_job_stuck only (group_name is fixed).
        ORDER BY j.group_name, j.submitted, j.id
        LIMIT g.n) c
