-- What an executor instance registered, if it is the instance registered
-- now for its app-id and live: a dispatch request is bounded by it.
-- $1: app-id, $2: instance.
SELECT slots, tasks FROM fairway_executor WHERE app_id = $1 AND instance = $2 AND state = 'live'
