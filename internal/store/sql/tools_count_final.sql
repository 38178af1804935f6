-- The fault suite's wait (internal/chaos): how many of the jobs $1 are final.
SELECT count(*) FROM fairway_job WHERE id = ANY($1) AND state IN ('success', 'failed', 'cancelled')
