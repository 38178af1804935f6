-- Sets the priority of job $1 of group $3 to $2.
UPDATE fairway_job SET priority = $2 WHERE group_name = $3 AND id = $1
