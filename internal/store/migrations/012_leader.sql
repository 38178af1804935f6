-- The maintenance leader: the one coordinator that runs the maintenance
-- loops (lease expiry, timed releases and expiry, marking executors gone,
-- retention, periodic firing, the sweep of blocked jobs), so that their
-- load on the database does not grow with the number of coordinators. A
-- lease on PostgreSQL's clock, renewed by its holder; term counts the
-- holders (see Store.LeadMaintenance).
CREATE TABLE fairway_leader (
    id     int PRIMARY KEY CHECK (id = 1),
    holder text NOT NULL,
    term   bigint NOT NULL,
    until  timestamptz NOT NULL
);
INSERT INTO fairway_leader (id, holder, term, until) VALUES (1, '', 0, '-infinity');
