-- Starts a claim: locks the fairness state (serialising claims across all
-- coordinators) and pins the claim's plans for the rest of the transaction.
-- The claim queries are written so that only the partial indexes
-- fairway_job_eligible and fairway_job_stuck give their order; with sorts,
-- bitmap and sequential scans off, the planner cannot wander to a plan that
-- reads every row of a group (it does, on a table without fresh statistics).
-- JIT is off: the disabled plan types add a huge cost that would make every
-- claim pay for compiling its queries. Plans are generic: left to choose,
-- PostgreSQL planned the candidates' queries anew on every claim (their
-- custom plans look cheaper), 70 to 170 us each, more than running them.
-- $1, $2: the executor's app-id and instance ('' for any): registered tells
-- whether that instance is the one registered now, and live (not marked
-- gone nor deregistered: such an instance must register again).
-- limited: whether concurrency or rate limits exist (claim_limits.sql and
-- claim_rates.sql read them); vclock: the clock of the groups' virtual
-- times; weighted: whether a group has a weight other than 1 (then claims
-- pick by virtual time, see shares.go); rated: whether rate limits exist.
SELECT last_group, counter,
       ($2::text = '' OR EXISTS (SELECT 1 FROM fairway_executor e WHERE e.app_id = $1 AND e.instance = $2 AND e.state = 'live')) AS registered,
       set_config('enable_sort', 'off', true),
       set_config('enable_bitmapscan', 'off', true),
       set_config('enable_seqscan', 'off', true),
       set_config('jit', 'off', true),
       set_config('plan_cache_mode', 'force_generic_plan', true),
       EXISTS (SELECT 1 FROM fairway_limit) OR EXISTS (SELECT 1 FROM fairway_rate_limit) AS limited,
       vclock,
       EXISTS (SELECT 1 FROM fairway_group_share WHERE weight <> 1) AS weighted,
       EXISTS (SELECT 1 FROM fairway_rate_limit) AS rated
  FROM fairway_fairness
 WHERE id = 1
   FOR UPDATE
