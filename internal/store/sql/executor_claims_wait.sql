-- Waits for the claim in progress, if any, and keeps new ones out until
-- the registration commits (the fairness row lock serialises claims; see
-- claim_lock.sql): a claim for the executor's previous instance then
-- either commits first, and its jobs are released with the others, or
-- comes after, and is refused (not registered). The count of
-- registrations tells a submission handed to an idle executor, which
-- waited for this lock, that the instance it checked may be gone
-- (insert_jobs.sql).
UPDATE fairway_fairness SET registrations = registrations + 1 WHERE id = 1
