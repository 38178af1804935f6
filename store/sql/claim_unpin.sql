-- Lets the planner choose freely again, for the marking of claimed jobs.
SELECT set_config('enable_sort', 'on', true),
       set_config('enable_bitmapscan', 'on', true),
       set_config('enable_seqscan', 'on', true)
