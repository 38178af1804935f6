-- Removes the rate limit of $1 task and $2 group.
DELETE FROM fairway_rate_limit WHERE task = $1 AND group_name = $2
