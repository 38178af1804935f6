-- Takes one batch of finished jobs out of their records: state $1, ended
-- more than $2 ago (PostgreSQL's clock), of group $3 ('' for every group),
-- the oldest first, at most $4 (fairway_prune, migration 029: it reads
-- the batches it takes and the next). Their records leave their batches
-- (fairway_records_drop: a batch whose records all go is deleted, another
-- is written again without them); it returns their groups and ids, whose
-- log lines and ids prune_ids.sql frees. Run after journal.RecordsLockSQL,
-- in its transaction: one writer of the batches at a time (another prune,
-- a retry by hand taking a job's record out).
SELECT group_name, id FROM fairway_prune($1, $2::interval, $3, $4)
