-- The journal mirror (issue 31, step 2 of docs/journal.md): triggers that
-- append to fairway_journal, in the statement's own transaction, what each
-- statement of the row engine did to fairway_job, as the rows the journal
-- engine will append itself. Installed by store.MirrorJournal (the tests'
-- databases, and `fairway bench --journal-mirror` to measure its cost),
-- never by a migration: the row engine does not need it. CheckJournalMirror
-- compares the fold of these rows with fairway_job.

CREATE OR REPLACE FUNCTION fairway_micros(t timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE AS $$ SELECT (extract(epoch FROM t) * 1000000)::bigint $$;

-- New jobs: submitted, and claimed too when stored handed to an executor.
-- (Jobs stored final, as tools' history, are not the journal's.) Items in
-- id order: the journal's oldest first is its order of items, the row
-- engine's the submission's time (one for a statement's jobs), then id.
CREATE OR REPLACE FUNCTION fairway_journal_mirror_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fairway_journal (kind, body)
    SELECT k.kind, '\x01'::bytea || convert_to(json_agg(k.item ORDER BY k.ord, k.group_name, k.id)::text, 'UTF8')
      FROM (SELECT 1 AS ord, 'submitted' AS kind, n.group_name, n.id,
                   json_build_object('g', n.group_name, 'id', n.id, 'task', n.task, 'pri', n.priority,
                                     'run_at', fairway_micros(n.run_at), 'max_retries', n.max_retries,
                                     'pending', n.state = 'pending' AND n.depends_on IS NULL, 'waits', n.depends_on,
                                     'expires_at', fairway_micros(n.expires_at)) AS item
              FROM new_rows n WHERE n.state IN ('pending', 'waiting', 'scheduled')
            UNION ALL
            SELECT 2, 'claimed', n.group_name, n.id,
                   json_build_object('g', n.group_name, 'id', n.id, 'a', n.attempt, 'executor', n.worker, 'instance', n.worker_instance)
              FROM new_rows n WHERE n.state = 'scheduled') AS k
     GROUP BY k.kind
     ORDER BY min(k.ord);
    RETURN NULL;
END $$;

-- Changed jobs: one row per kind of change the statement made.
CREATE OR REPLACE FUNCTION fairway_journal_mirror_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fairway_journal (kind, body)
    SELECT c.kind, '\x01'::bytea || convert_to(json_agg(c.item ORDER BY c.group_name, c.id)::text, 'UTF8')
      FROM (SELECT n.group_name, n.id, v.kind, v.item
              FROM old_rows o JOIN new_rows n ON n.group_name = o.group_name AND n.id = o.id
             CROSS JOIN LATERAL (VALUES
                 (CASE
                      WHEN o.state IN ('waiting', 'stuck') AND n.state = 'scheduled' THEN 'claimed'
                      WHEN o.state = 'scheduled' AND n.state = 'running' THEN 'started'
                      WHEN o.state IN ('scheduled', 'running') AND n.state IN ('success', 'failed', 'cancelled', 'stuck', 'waiting') THEN 'ended'
                      WHEN o.state = 'pending' AND n.state = 'waiting' THEN 'resolved'
                      WHEN o.state IN ('pending', 'waiting', 'stuck') AND n.state = 'cancelled' THEN 'cancel'
                      WHEN o.state IN ('pending', 'waiting', 'stuck') AND n.state = 'failed' THEN 'expired'
                      WHEN o.state IN ('success', 'failed', 'cancelled') AND n.state IN ('waiting', 'pending') THEN 'retried'
                  END,
                  json_build_object('g', n.group_name, 'id', n.id, 'a', CASE WHEN n.state = 'scheduled' AND o.state <> 'scheduled' THEN n.attempt ELSE o.attempt END,
                                    'executor', CASE WHEN n.state = 'scheduled' AND o.state <> 'scheduled' THEN n.worker ELSE o.worker END,
                                    'instance', CASE WHEN n.state = 'scheduled' AND o.state <> 'scheduled' THEN n.worker_instance ELSE o.worker_instance END,
                                    'outcome', CASE n.state WHEN 'success' THEN 'success' WHEN 'cancelled' THEN 'cancelled'
                                                            WHEN 'waiting' THEN 'snooze' ELSE 'error' END,
                                    'permanent', n.state = 'failed', 'run_at', fairway_micros(n.run_at), 'error', n.error,
                                    'waits', n.depends_on,
                                    -- retried: what a submission says
                                    'task', n.task, 'pri', n.priority, 'max_retries', n.max_retries,
                                    'expires_at', fairway_micros(n.expires_at))),
                 (CASE WHEN o.state = n.state AND n.state IN ('scheduled', 'running') AND o.progress <> n.progress THEN 'progress' END,
                  json_build_object('g', n.group_name, 'id', n.id, 'a', n.attempt, 'executor', n.worker, 'instance', n.worker_instance,
                                    'progress', n.progress)),
                 (CASE WHEN o.state = n.state AND n.state IN ('scheduled', 'running') AND n.cancel_requested AND NOT o.cancel_requested THEN 'cancel' END,
                  json_build_object('g', n.group_name, 'id', n.id)),
                 (CASE WHEN o.priority <> n.priority AND n.state NOT IN ('success', 'failed', 'cancelled') THEN 'priority' END,
                  json_build_object('g', n.group_name, 'id', n.id, 'pri', n.priority))
             ) AS v (kind, item)
             WHERE v.kind IS NOT NULL) AS c
     GROUP BY c.kind;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS fairway_journal_mirror_insert ON fairway_job;
CREATE TRIGGER fairway_journal_mirror_insert AFTER INSERT ON fairway_job
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION fairway_journal_mirror_insert();
DROP TRIGGER IF EXISTS fairway_journal_mirror_update ON fairway_job;
CREATE TRIGGER fairway_journal_mirror_update AFTER UPDATE ON fairway_job
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION fairway_journal_mirror_update();
