-- Whether job $2 of group $1 exists.
SELECT EXISTS (SELECT 1 FROM fairway_job WHERE group_name = $1 AND id = $2)
