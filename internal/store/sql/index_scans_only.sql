-- Has the rest of the transaction's statements find their rows through
-- indexes only: those of the dependency look-ups (blocked_dependents.sql,
-- graph_dependents.sql) through fairway_record_waits. The planner does
-- not count the cost of reading a long depends_on (stored compressed, out
-- of line) in a filter, so on a small or freshly loaded table (a GIN index
-- whose pending list autovacuum has not merged yet) it may prefer a
-- sequential scan that reads every job's array: thousands of them for a
-- look-up that finds one, another tenant's among them.
SELECT set_config('enable_seqscan', 'off', true)
