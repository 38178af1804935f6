-- Pins the plans of the claim queries (see claim_lock.sql).
SELECT set_config('enable_sort', 'off', true),
       set_config('enable_bitmapscan', 'off', true),
       set_config('enable_seqscan', 'off', true),
       set_config('jit', 'off', true),
       set_config('plan_cache_mode', 'force_generic_plan', true)
