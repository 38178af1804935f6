-- How long the jobs of tasks $2 run in groups $1, and over every group
-- (group_name ''): what a job is expected to cost when fairness counts
-- time.
SELECT group_name, task, avg_ms
  FROM fairway_run_time
 WHERE group_name = ANY ($1::text[] || '{""}'::text[]) AND task = ANY ($2::text[])
