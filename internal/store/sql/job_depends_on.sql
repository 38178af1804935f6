-- The depends_on of job $2 of group $1 (NULL: none).
SELECT depends_on FROM fairway_job WHERE group_name = $1 AND id = $2
