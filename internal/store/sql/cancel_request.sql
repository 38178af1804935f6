-- Asks the executor holding job $1 of group $2 to cancel it.
UPDATE fairway_job SET cancel_requested = true WHERE group_name = $2 AND id = $1
