-- Waits for the claim in progress, if any, and keeps new ones out until
-- the registration commits (the fairness row lock serialises claims; see
-- claim_lock.sql): a claim for the executor's previous instance then
-- either commits first, and its jobs are released with the others, or
-- comes after, and is refused (not registered).
SELECT 1 FROM fairway_fairness WHERE id = 1 FOR UPDATE
