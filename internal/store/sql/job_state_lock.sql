-- Locks job $1 of group $2 and reads its state.
SELECT state FROM fairway_job WHERE group_name = $2 AND id = $1 FOR UPDATE
