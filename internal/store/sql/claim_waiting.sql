-- Up to n due waiting jobs of one priority in each group, oldest first.
-- Not locked: claims are serialised by the fairness lock, and claim_mark.sql
-- marks a candidate only if it is still in the state read here.
-- $1: groups, $2: how many of each, $3: tasks, $4: priority.
SELECT c.id, c.group_name, c.priority, c.task
  FROM unnest($1::text[], $2::int[]) AS g (name, n)
 CROSS JOIN LATERAL (
       SELECT j.id, j.group_name, j.priority, j.task
         FROM fairway_job j
        WHERE j.group_name = g.name AND j.state = 'waiting' AND j.priority = $4
          AND j.run_at <= now() AND j.task = ANY ($3::text[])
        -- The leading columns are fixed by the WHERE clause; naming them
        -- keeps the planner on fairway_job_eligible.
        ORDER BY j.group_name, j.state, j.priority, j.submitted, j.id
        LIMIT g.n) c
