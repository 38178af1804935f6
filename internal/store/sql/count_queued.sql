-- Per group of $1, its queued jobs (waiting, stuck, pending), each state
-- counted through its partial index and capped at $2.
SELECT g.group_name,
       (SELECT count(*) FROM (SELECT 1 FROM fairway_job j
                               WHERE j.group_name = g.group_name AND j.state IN ('waiting', 'stuck') LIMIT $2) e)
     + (SELECT count(*) FROM (SELECT 1 FROM fairway_job j
                               WHERE j.group_name = g.group_name AND j.state = 'pending' LIMIT $2) p)
  FROM unnest($1::text[]) AS g (group_name)
