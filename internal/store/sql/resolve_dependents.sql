-- Resolves the blocked jobs (pending, with depends_on) among the
-- candidates $1 groups, $2 ids, taken in that order, as far as the bounds
-- allow: a job all of whose dependencies succeeded becomes waiting (due at
-- its run_at, or now); a job one of whose dependencies failed, was
-- cancelled or does not exist is cancelled, its error naming that
-- dependency. Jobs whose dependencies have not all ended stay as they are.
-- Each change writes its event. Candidates that are not blocked (any more)
-- cost a key look-up and nothing else.
-- Bounds: every dependency entry of a job taken is looked up, so the
-- statement counts them. A blocked candidate is taken while the entries of
-- its group's candidates taken before it stay under $3 and, of those, the
-- entries of all taken before it stay under $4 (a group's first, and the
-- statement's first, are always taken): a statement checks at most
-- $4 + 255 entries, a group's slice of it at most $3 + 255. The blocked
-- candidates not taken are returned (left = true), for the caller to queue
-- again; the caller bounds the number of candidates.
-- Run as a statement of its own after the ends commit: its snapshot then
-- sees every dependency that ended before. A job two resolutions release at
-- once is changed once: the update re-checks that it is still pending.
-- Plan: fairway_job_pkey for each candidate and each dependency entry.
WITH c AS (
    SELECT u.group_name, u.id, u.ord
      FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u (group_name, id, ord)
), b AS (
    SELECT c.ord, j.group_name, j.id, j.depends_on, cardinality(j.depends_on) AS n,
           sum(cardinality(j.depends_on)) OVER (PARTITION BY j.group_name ORDER BY c.ord) AS in_group
      FROM c
      JOIN fairway_job j ON j.group_name = c.group_name AND j.id = c.id
                        AND j.state = 'pending' AND j.depends_on IS NOT NULL
), g AS (
    SELECT b.*, sum(b.n) OVER (ORDER BY b.ord) AS in_all
      FROM b
     WHERE b.in_group - b.n < $3
), taken AS (
    SELECT g.ord, g.group_name, g.id, g.depends_on FROM g WHERE g.in_all - g.n < $4
), st AS (
    SELECT t.group_name, t.id,
           bool_and(d.state IS NOT DISTINCT FROM 'success') AS ready,
           (array_agg(u.dep ORDER BY u.ord) FILTER (WHERE d.state IS NULL OR d.state IN ('failed', 'cancelled')))[1] AS bad_dep,
           (array_agg(coalesce(d.state, 'missing') ORDER BY u.ord) FILTER (WHERE d.state IS NULL OR d.state IN ('failed', 'cancelled')))[1] AS bad_state
      FROM taken t
     CROSS JOIN LATERAL unnest(t.depends_on) WITH ORDINALITY AS u (dep, ord)
      LEFT JOIN fairway_job d ON d.group_name = t.group_name AND d.id = u.dep
     GROUP BY t.group_name, t.id
), upd AS (
    UPDATE fairway_job j
       SET state = CASE WHEN st.bad_dep IS NULL THEN 'waiting' ELSE 'cancelled' END,
           finished = CASE WHEN st.bad_dep IS NULL THEN NULL ELSE now() END,
           error = CASE st.bad_state
                       WHEN 'failed' THEN format('dependency %s failed', st.bad_dep)
                       WHEN 'cancelled' THEN format('dependency %s was cancelled', st.bad_dep)
                       WHEN 'missing' THEN format('dependency %s does not exist', st.bad_dep)
                   END
      FROM st
     WHERE j.group_name = st.group_name AND j.id = st.id AND j.state = 'pending'
       AND (st.ready OR st.bad_dep IS NOT NULL)
 RETURNING j.group_name, j.id, j.task, j.state, j.attempt, j.run_at, coalesce(j.error, '') AS error
), ev AS (
    INSERT INTO fairway_event (job_id, task, group_name, state, prev_state, attempt, error)
    SELECT id, task, group_name, state, 'pending', attempt, error FROM upd
)
SELECT false AS left_over, group_name, id, state, run_at FROM upd
UNION ALL
SELECT true, b.group_name, b.id, NULL, NULL
  FROM b
 WHERE NOT EXISTS (SELECT 1 FROM taken t WHERE t.ord = b.ord)
