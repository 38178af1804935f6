-- The fault suite's accounting (internal/chaos): every job's state and
-- attempts, whatever its group.
SELECT id, state, attempt, retries FROM fairway_job
