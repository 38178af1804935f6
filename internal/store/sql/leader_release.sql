-- Gives up the maintenance lead of $1, if it holds it: another coordinator
-- takes it at its next try rather than after the lease.
UPDATE fairway_leader SET until = '-infinity' WHERE id = 1 AND holder = $1
