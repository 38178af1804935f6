-- Releases or cancels blocked jobs (pending, with depends_on) whose
-- dependencies have ended: a job all of whose dependencies succeeded
-- becomes waiting (due at its run_at, or now); a job one of whose
-- dependencies failed, was cancelled or does not exist is cancelled, its
-- error naming that dependency. Jobs whose dependencies have not all ended
-- stay as they are. Each change writes its event.
-- The jobs looked at: those that name one of the jobs that ended ($1
-- groups, $2 ids; through fairway_job_dependents), and the candidates $3
-- groups, $4 ids themselves (just stored, or found by the sweep).
-- Run as a statement of its own after the ends commit: its snapshot then
-- sees every dependency that ended before. A job two ends release at once
-- is changed once: the update re-checks that it is still pending.
WITH cand AS (
    -- One scan of fairway_job_dependents for all of them (overlap), then
    -- the group is checked: ids are unique per group only.
    SELECT j.group_name, j.id
      FROM fairway_job j
     WHERE j.depends_on && $2::text[] AND j.depends_on IS NOT NULL AND j.state = 'pending'
       AND EXISTS (SELECT 1 FROM unnest($1::text[], $2::text[]) AS e (group_name, id)
                    WHERE e.group_name = j.group_name AND e.id = ANY (j.depends_on))
    UNION
    SELECT c.group_name, c.id FROM unnest($3::text[], $4::text[]) AS c (group_name, id)
), st AS (
    SELECT j.group_name, j.id,
           bool_and(d.state IS NOT DISTINCT FROM 'success') AS ready,
           (array_agg(u.dep ORDER BY u.ord) FILTER (WHERE d.state IS NULL OR d.state IN ('failed', 'cancelled')))[1] AS bad_dep,
           (array_agg(coalesce(d.state, 'missing') ORDER BY u.ord) FILTER (WHERE d.state IS NULL OR d.state IN ('failed', 'cancelled')))[1] AS bad_state
      FROM cand c
      JOIN fairway_job j ON j.group_name = c.group_name AND j.id = c.id
                        AND j.state = 'pending' AND j.depends_on IS NOT NULL
     CROSS JOIN LATERAL unnest(j.depends_on) WITH ORDINALITY AS u (dep, ord)
      LEFT JOIN fairway_job d ON d.group_name = j.group_name AND d.id = u.dep
     GROUP BY j.group_name, j.id
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
SELECT group_name, id, state, run_at FROM upd
