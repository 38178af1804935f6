-- fairway_live: the unfinished jobs, for operators' SQL, on either engine
-- (issue 31, condition 3; docs/operations.md "SQL for operators"). On the
-- row engine they are fairway_job's rows not yet final. On the journal
-- engine they are in the partition leader's memory, and in no table the
-- hot path writes: a read of fairway_live asks each partition's leader
-- for them (it holds an advisory lock of the class 'LIVE' shared, which
-- the leaders look for every 100 ms), and waits until each has written
-- its jobs to fairway_live_job, as of after the read began (the changes
-- since its last write, or the whole table), and said so in
-- fairway_live_state. So a read sees every change committed before it
-- began, and a cluster that nobody queries pays nothing
-- (internal/journal/live.go). UNLOGGED: derived from the journal, no WAL.

CREATE UNLOGGED TABLE fairway_live_job (
    group_name      text NOT NULL,
    id              text NOT NULL,
    task            text NOT NULL,
    state           text NOT NULL,
    priority        text NOT NULL,
    run_at          timestamptz, -- NULL: due from its submission
    expires_at      timestamptz,
    attempt         int NOT NULL,
    retries         int NOT NULL,
    max_retries     int NOT NULL,
    depends_on      text[],
    worker          text,
    worker_instance text,
    scheduled_at    timestamptz,
    started         timestamptz,
    journal_row     bigint NOT NULL, -- the submitted row that carries its args
    journal_index   int NOT NULL,
    PRIMARY KEY (group_name, id)
);

-- When each partition's leader last wrote fairway_live_job.
CREATE UNLOGGED TABLE fairway_live_state (
    partition smallint PRIMARY KEY,
    written   timestamptz NOT NULL
);

CREATE FUNCTION fairway_live(wait interval DEFAULT '15 seconds')
RETURNS TABLE (group_name text, id text, task text, state text, priority text, run_at timestamptz, expires_at timestamptz,
               attempt int, retries int, max_retries int, depends_on text[], executor text, instance text,
               submitted timestamptz, scheduled_at timestamptz, started timestamptz, args jsonb, as_of timestamptz)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    asked   timestamptz := clock_timestamp();
    p       smallint;
    behind  smallint[];
BEGIN
    -- The journal's partitions (none on the row engine).
    SELECT array_agg(l.partition) INTO behind FROM fairway_journal_lease l;
    IF behind IS NOT NULL AND current_setting('transaction_isolation') <> 'read committed' THEN
        -- Its statements see the transaction's snapshot, taken before
        -- the leader's write: waiting would see nothing new.
        RAISE WARNING 'fairway_live: in a % transaction, the unfinished jobs are as the leader last wrote them (as_of): read it in a READ COMMITTED one to see every change committed before the read', current_setting('transaction_isolation');
        behind := NULL;
    END IF;
    IF behind IS NOT NULL THEN
        FOREACH p IN ARRAY behind LOOP
            PERFORM pg_advisory_xact_lock_shared(1279874629, p); -- 'LIVE'
        END LOOP;
        LOOP
            -- A statement each time: it sees what committed since.
            SELECT array_agg(l.partition) INTO behind
              FROM fairway_journal_lease l LEFT JOIN fairway_live_state s USING (partition)
             WHERE s.written IS NULL OR s.written < asked;
            EXIT WHEN behind IS NULL;
            IF clock_timestamp() > asked + wait THEN
                RAISE WARNING 'fairway_live: the leader of journal partitions % did not write its jobs within %: they are as it last wrote them (as_of)', behind, wait;
                EXIT;
            END IF;
            PERFORM pg_sleep(0.01);
        END LOOP;
    END IF;
    RETURN QUERY
    SELECT j.group_name, j.id, j.task, j.state, j.priority, j.run_at, j.expires_at, j.attempt, j.retries, j.max_retries, j.depends_on,
           j.worker, nullif(j.worker_instance, ''), j.submitted, j.scheduled_at, j.started, j.args, now()
      FROM fairway_job j
     WHERE j.state NOT IN ('success', 'failed', 'cancelled')
    UNION ALL
    SELECT l.group_name, l.id, l.task, l.state, l.priority, coalesce(l.run_at, r.at), l.expires_at, l.attempt, l.retries, l.max_retries,
           l.depends_on, l.worker, l.worker_instance, r.at + l.journal_index * interval '1 microsecond', l.scheduled_at, l.started,
           NULL::jsonb, s.written
      FROM fairway_live_job l
      LEFT JOIN fairway_journal r ON r.id = l.journal_row
      LEFT JOIN fairway_live_state s ON s.partition = coalesce(r.partition, 0);
END
$$;

CREATE VIEW fairway_live AS SELECT * FROM fairway_live();
