-- Event packs: the statements on every job's path (ingest, claim, start,
-- end) write the events of the whole statement as one outbox row, a pack,
-- instead of a row per event. A pack's pack_* arrays hold, for each of its
-- n events in order, the value of the field; a field the same for every
-- event (a claim's state and executor, say) stays in the scalar column.
-- One row per statement instead of one per job: the outbox's inserts,
-- reads, deletes and index entries per job shrink to a fraction.
-- Other statements write single events as before (n = 1, no arrays).
ALTER TABLE fairway_event
    ADD COLUMN n int NOT NULL DEFAULT 1,
    ADD COLUMN pack_job_ids text[],
    ADD COLUMN pack_tasks text[],
    ADD COLUMN pack_groups text[],
    ADD COLUMN pack_states text[],
    ADD COLUMN pack_prev_states text[],
    ADD COLUMN pack_attempts int[],
    ADD COLUMN pack_errors text[],
    ADD COLUMN pack_workers text[],
    ADD COLUMN pack_times timestamptz[];
-- Packs are read once and deleted: stored out of line without compressing
-- them (compression would cost more CPU than the bytes it saves).
ALTER TABLE fairway_event
    ALTER COLUMN pack_job_ids SET STORAGE EXTERNAL,
    ALTER COLUMN pack_tasks SET STORAGE EXTERNAL,
    ALTER COLUMN pack_groups SET STORAGE EXTERNAL,
    ALTER COLUMN pack_states SET STORAGE EXTERNAL,
    ALTER COLUMN pack_prev_states SET STORAGE EXTERNAL,
    ALTER COLUMN pack_attempts SET STORAGE EXTERNAL,
    ALTER COLUMN pack_errors SET STORAGE EXTERNAL,
    ALTER COLUMN pack_workers SET STORAGE EXTERNAL,
    ALTER COLUMN pack_times SET STORAGE EXTERNAL;
