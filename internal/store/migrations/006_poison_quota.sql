-- fairway_jsonb_ok says whether PostgreSQL can store a text as jsonb. It
-- isolates the value that made a batch fail (a number out of numeric's
-- range, say) in one statement over the batch instead of one statement per
-- row. Each call is a subtransaction, so it is used only once a batch has
-- been refused (PostgreSQL 16 has pg_input_is_valid for this).
CREATE FUNCTION fairway_jsonb_ok(doc text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM doc::jsonb;
    RETURN true;
EXCEPTION WHEN others THEN
    RETURN false;
END
$$;

-- The quota on non-final jobs counts a group's jobs not yet handed to an
-- executor: waiting and stuck ones through fairway_job_eligible, pending
-- ones through this index (index-only scans, capped at the quota). An index
-- of every non-final job cost a fifth of the drain rate (an entry for every
-- row version a job goes through); this one holds only the pending rows.
CREATE INDEX fairway_job_pending ON fairway_job (group_name) WHERE state = 'pending';
