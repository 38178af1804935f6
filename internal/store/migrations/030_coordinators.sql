-- Issue 34: the coordinators that run, for the balance of the partitions'
-- leases between them (internal/journal, balance.go). Each coordinator
-- says it is alive every half second; one silent for 3 s is gone.
CREATE TABLE fairway_coordinator (
    holder text PRIMARY KEY,
    seen   timestamptz NOT NULL
);
