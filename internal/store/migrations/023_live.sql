-- fairway_live: the unfinished jobs, for operators' SQL, on either engine
-- (issue 31, condition 3; docs/operations.md "SQL for operators"). On the
-- row engine they are fairway_job's rows not yet final. On the journal
-- engine they are in no table the hot path writes: the partition's leader
-- keeps fairway_live_job up to date from its state, each second, with the
-- jobs that changed (internal/journal/live.go), and rewrites it whole when
-- it comes to lead. UNLOGGED: it is derived from the journal, costs no
-- WAL, and is empty after a crash or on a promoted standby until the new
-- leader's rewrite.
CREATE UNLOGGED TABLE fairway_live_job (
    group_name    text NOT NULL,
    id            text NOT NULL,
    task          text NOT NULL,
    state         text NOT NULL,
    priority      text NOT NULL,
    run_at        timestamptz, -- NULL: due from its submission
    expires_at    timestamptz,
    attempt       int NOT NULL,
    retries       int NOT NULL,
    max_retries   int NOT NULL,
    depends_on    text[],
    worker          text,
    worker_instance text,
    scheduled_at  timestamptz,
    started       timestamptz,
    journal_row   bigint NOT NULL, -- the submitted row that carries its args
    journal_index int NOT NULL,
    updated       timestamptz NOT NULL DEFAULT now(), -- when the leader wrote it
    PRIMARY KEY (group_name, id)
);

CREATE VIEW fairway_live AS
SELECT group_name, id, task, state, priority, run_at, expires_at, attempt, retries, max_retries, depends_on,
       worker AS executor, nullif(worker_instance, '') AS instance, submitted, scheduled_at, started,
       args, now() AS as_of
  FROM fairway_job
 WHERE state NOT IN ('success', 'failed', 'cancelled')
UNION ALL
SELECT l.group_name, l.id, l.task, l.state, l.priority, coalesce(l.run_at, r.at), l.expires_at, l.attempt, l.retries, l.max_retries, l.depends_on,
       l.worker, l.worker_instance, r.at, l.scheduled_at, l.started,
       NULL::jsonb, l.updated
  FROM fairway_live_job l
  LEFT JOIN fairway_journal r ON r.id = l.journal_row;
