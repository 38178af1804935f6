-- Retention reads the batches it prunes and no others (issue 31,
-- docs/performance.md "Retention at the size of its batch").
--
-- A prune of one state sorted the records of every expired batch to take
-- the oldest thousand, and freed their ids by reading every id kept: each
-- prune read the whole expired history (300 µs and more a pruned job,
-- growing with it), and the successes pruned after a day walked the
-- failed jobs kept for thirty. Now an index of end times per final state
-- finds the batches that hold the state, oldest first, and fairway_prune
-- walks them batch by batch until it has taken its limit.
CREATE INDEX fairway_record_success ON fairway_record (finished, id) WHERE 'success' = ANY (s_states);
CREATE INDEX fairway_record_failed ON fairway_record (finished, id) WHERE 'failed' = ANY (s_states);
CREATE INDEX fairway_record_cancelled ON fairway_record (finished, id) WHERE 'cancelled' = ANY (s_states);

-- fairway_records_drop parses a batch's records once when they all go
-- (the batch is deleted) and twice when some stay (the batch is written
-- again without the others), where it parsed them three times (the
-- records taken, whether any was left, the records kept); and it no
-- longer compares every place with every record taken.
CREATE OR REPLACE FUNCTION fairway_records_drop(b bigint, gone bigint[]) RETURNS TABLE (group_name text, id text)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r    fairway_record;
    keep bigint[];
BEGIN
    SELECT * INTO r FROM fairway_record WHERE fairway_record.id = b;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The places (1-based, in line with the batch's arrays) of the records
    -- kept: an anti-join, where p <> ALL (gone) compared every place with
    -- every record taken (a million comparisons in a batch of a thousand).
    keep := ARRAY(SELECT p FROM generate_series(1, cardinality(r.s_states)) AS p
                   WHERE NOT EXISTS (SELECT 1 FROM unnest(gone) AS g (o) WHERE g.o = p) ORDER BY p);
    RETURN QUERY
    SELECT x.group_name, x.id
      FROM ROWS FROM (json_to_recordset(r.jobs) AS (group_name text, id text)) WITH ORDINALITY AS x (group_name, id, o)
     WHERE cardinality(keep) = 0 OR x.o IN (SELECT unnest(gone));
    IF cardinality(keep) = 0 THEN
        DELETE FROM fairway_record WHERE fairway_record.id = b;
        RETURN;
    END IF;
    UPDATE fairway_record
       SET jobs = (SELECT json_agg(x.e ORDER BY x.o) FROM json_array_elements(r.jobs) WITH ORDINALITY AS x (e, o)
                    WHERE x.o IN (SELECT unnest(keep))),
           keys = ARRAY(SELECT r.keys[k] FROM unnest(keep) AS k ORDER BY k),
           groups = ARRAY(SELECT DISTINCT r.s_groups[k] FROM unnest(keep) AS k),
           s_groups = ARRAY(SELECT r.s_groups[k] FROM unnest(keep) AS k ORDER BY k),
           s_tasks = ARRAY(SELECT r.s_tasks[k] FROM unnest(keep) AS k ORDER BY k),
           s_states = ARRAY(SELECT r.s_states[k] FROM unnest(keep) AS k ORDER BY k),
           s_started = ARRAY(SELECT r.s_started[k] FROM unnest(keep) AS k ORDER BY k),
           s_due = ARRAY(SELECT r.s_due[k] FROM unnest(keep) AS k ORDER BY k),
           s_finished = CASE WHEN r.s_finished IS NULL THEN NULL
                             ELSE ARRAY(SELECT r.s_finished[k] FROM unnest(keep) AS k ORDER BY k) END
     WHERE fairway_record.id = b;
END
$$;

-- fairway_prune takes up to lim records of jobs in state st that ended
-- more than older ago, of group grp ('' for every group), the oldest
-- first, out of their batches (fairway_records_drop), and returns their
-- groups and ids. The walk is a statement planned with the state written
-- in (EXECUTE: so that it reads that state's index), each of its batches
-- holding a record to take, read a few at a time (a FOR loop's cursor):
-- it stops at the batch that reaches lim.
CREATE FUNCTION fairway_prune(st text, older interval, grp text, lim int) RETURNS TABLE (group_name text, id text)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    b     record;
    gone  bigint[];
    taken int := 0;
BEGIN
    IF st NOT IN ('success', 'failed', 'cancelled') THEN
        RAISE EXCEPTION 'fairway_prune: % is not a final state', st;
    END IF;
    FOR b IN EXECUTE format(
        $q$SELECT r.id, r.s_states, r.s_groups FROM fairway_record r
            WHERE %L = ANY (r.s_states) AND r.finished < now() - $1
              AND ($2 = '' OR (r.groups @> ARRAY[$2] AND EXISTS (
                   SELECT 1 FROM unnest(r.s_states, r.s_groups) AS u (state, group_name) WHERE u.state = %L AND u.group_name = $2)))
            ORDER BY r.finished, r.id LIMIT $3$q$, st, st) USING older, grp, lim
    LOOP
        SELECT array_agg(u.o ORDER BY u.o) INTO gone
          FROM (SELECT u.o FROM unnest(b.s_states, b.s_groups) WITH ORDINALITY AS u (state, group_name, o)
                 WHERE u.state = st AND (grp = '' OR u.group_name = grp)
                 ORDER BY u.o LIMIT lim - taken) u;
        CONTINUE WHEN gone IS NULL;
        RETURN QUERY SELECT d.group_name, d.id FROM fairway_records_drop(b.id, gone) d;
        taken := taken + cardinality(gone);
        EXIT WHEN taken >= lim;
    END LOOP;
END
$$;
