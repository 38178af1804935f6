-- The journal engine (issue 31, docs/journal.md): the job ids taken, for
-- good. A submission takes its id here in the transaction that appends it
-- to the journal; an id taken before (a job live, ended or being
-- submitted by another transaction) is not appended again, so that a
-- publish sent again, or an id reused, makes no second job, as the job
-- row's primary key ensures in the row engine. Retention frees an id with
-- its job's record.
CREATE TABLE fairway_job_id (
    group_name text NOT NULL,
    id         text NOT NULL,
    PRIMARY KEY (group_name, id)
);
