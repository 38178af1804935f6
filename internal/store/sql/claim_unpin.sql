-- Lets the planner sort and use bitmap scans again, for the marking of
-- claimed jobs. Sequential scans stay off: the marking's plan is generic
-- (plan_cache_mode stays forced) and cached for the connection, and a
-- generic plan made while the table was small joins the chosen ids to a
-- sequential scan of the whole table; it stayed cached as the table grew,
-- 3 ms for every claim of a few jobs once it held 20,000.
SELECT set_config('enable_sort', 'on', true),
       set_config('enable_bitmapscan', 'on', true)
