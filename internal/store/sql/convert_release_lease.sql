-- The move onto the journal (store.ConvertToJournal) gives up the lease of
-- partition $1 it held as $2: the first coordinator takes it at once.
UPDATE fairway_journal_lease SET until = now() WHERE partition = $1 AND holder = $2
