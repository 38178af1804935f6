-- A coordinator that runs on this database (store.ConvertToJournal): one
-- holds the maintenance lead (renewed every second, 3 s) while it runs.
SELECT holder, until FROM fairway_leader WHERE until > now()
