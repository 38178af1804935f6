-- Listens for jobs stored in callers' transactions (see notify_jobs.sql).
LISTEN fairway_jobs
