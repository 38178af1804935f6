package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

//go:embed sql/insert_jobs.sql
var insertJobsSQL string

// Rejection is a submission that failed validation: it gets a rejected
// event and no job row.
type Rejection struct {
	JobID string
	Group string
	Task  string
	Err   *fairway.Error
}

// Inserted is the outcome of one submission passed to InsertJobs.
type Inserted struct {
	// ID is the job's id.
	ID string
	// Created is false when a job with this id existed already: the submit
	// was a duplicate and changed nothing.
	Created bool
	// Err is set when the submission was refused (a tracker held by another
	// job); a rejected event was written for it.
	Err *fairway.Error
}

// InsertJobs stores normalized submissions with their events, and writes
// rejected events for rejections. The result has one entry per submission,
// in order. The common case is one statement; submissions that were not
// created (a duplicate id, or a tracker held by another job) cost a
// follow-up query, and a refusal its rejected event.
func (s *Store) InsertJobs(ctx context.Context, subs []fairway.Submission, rejections []Rejection) ([]Inserted, error) {
	out, err := insertJobs(ctx, s.pool, subs, rejections)
	if err != nil {
		return nil, fmt.Errorf("inserting %d jobs: %w", len(subs), interpretError(err))
	}
	var refused []Rejection
	for i, r := range out {
		if r.Err != nil {
			refused = append(refused, Rejection{JobID: subs[i].ID, Group: subs[i].Group, Task: subs[i].Task, Err: r.Err})
		}
	}
	if len(refused) > 0 {
		if _, err := insertJobs(ctx, s.pool, nil, refused); err != nil {
			return nil, fmt.Errorf("recording %d refused jobs: %w", len(refused), interpretError(err))
		}
	}
	return out, nil
}

// querier is what insertJobs needs of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func insertJobs(ctx context.Context, tx querier, subs []fairway.Submission, rejections []Rejection) ([]Inserted, error) {
	out := make([]Inserted, len(subs))
	// Insert in id order, so that concurrent inserts of overlapping batches
	// take their locks in the same order and cannot deadlock.
	order := make([]int, len(subs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(subs[a].ID, subs[b].ID) })
	n := len(subs)
	ids, tasks, groups := make([]string, n), make([]string, n), make([]string, n)
	args := make([][]byte, n)
	subjects, submitters, prios, trackers, states := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	maxRetries := make([]int32, n)
	runAts, expiresAts, triggers := make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
	positions := make([]int32, n)
	for k, i := range order {
		sub := subs[i]
		ids[k], tasks[k], groups[k], args[k] = sub.ID, sub.Task, sub.Group, sub.Args
		subjects[k], submitters[k], prios[k], trackers[k] = sub.Subject, sub.Submitter, string(sub.Priority), sub.Tracker
		states[k] = string(fairway.StateWaiting)
		if sub.Held() {
			states[k] = string(fairway.StatePending)
		}
		expiresAts[k], triggers[k] = sub.ExpiresAt, sub.TriggerAfter
		if sub.MaxRetries != nil {
			maxRetries[k] = int32(*sub.MaxRetries)
		}
		runAts[k], positions[k] = sub.RunAt, int32(i)
	}
	m := len(rejections)
	rIDs, rGroups, rTasks, rErrs, rCodes, rFields := make([]string, m), make([]string, m), make([]string, m), make([]string, m), make([]string, m), make([]string, m)
	for i, r := range rejections {
		rIDs[i], rGroups[i], rTasks[i] = r.JobID, r.Group, r.Task
		rErrs[i], rCodes[i], rFields[i] = r.Err.Message, string(r.Err.Code), r.Err.Field
	}
	rows, err := tx.Query(ctx, insertJobsSQL, ids, tasks, groups, args, subjects, submitters, prios, trackers, states, maxRetries, runAts, positions,
		rIDs, rGroups, rTasks, rErrs, rCodes, rFields, expiresAts, triggers)
	if err != nil {
		return nil, err
	}
	created, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	isCreated := make(map[string]bool, len(created))
	for _, id := range created {
		isCreated[id] = true
	}
	var missing, trackersWanted []string
	for i, sub := range subs {
		// Only the first of several submissions of one id created it.
		out[i] = Inserted{ID: sub.ID, Created: isCreated[sub.ID]}
		delete(isCreated, sub.ID)
		if !out[i].Created {
			missing = append(missing, sub.ID) // a duplicate in the batch is found by id below
			if sub.Tracker != "" {
				trackersWanted = append(trackersWanted, sub.Tracker)
			}
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	// A row not created either has an existing id (a duplicate submit,
	// fine) or a tracker held by a non-final job (refused).
	existing := map[string]bool{}
	rows, err = tx.Query(ctx, "SELECT id FROM fairway_job WHERE id = ANY ($1)", missing)
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, id := range found {
		existing[id] = true
	}
	holders := map[string]string{}
	if len(trackersWanted) > 0 {
		rows, err = tx.Query(ctx, `SELECT tracker, id FROM fairway_job
			WHERE tracker = ANY ($1) AND state NOT IN ('success', 'failed', 'cancelled')`, trackersWanted)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var tracker, id string
			if err := rows.Scan(&tracker, &id); err != nil {
				return nil, err
			}
			holders[tracker] = id
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	for i, sub := range subs {
		if out[i].Created || existing[sub.ID] {
			continue
		}
		holder := holders[sub.Tracker]
		if holder == "" {
			// The tracker's holder ended between the insert and the look-up:
			// trying again will store it.
			return nil, &fairway.Error{Code: fairway.CodeUnavailable, JobID: sub.ID,
				Message: fmt.Sprintf("job %s raced with the end of the job holding its tracker; try again", sub.ID)}
		}
		out[i].Err = fairway.Duplicate(sub.Tracker, holder)
	}
	return out, nil
}

// Get returns a job. With group set, a job of another group is not found.
func (s *Store) Get(ctx context.Context, group, id string) (*fairway.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, "SELECT "+jobColumns+" FROM fairway_job WHERE id = $1 AND ($2 = '' OR group_name = $2)", id, group))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fairway.NotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading job %s: %w", id, interpretError(err))
	}
	return &j, nil
}

// ListParams filters List; empty fields match everything.
type ListParams struct {
	Group string
	Task  string
	State fairway.State
	// Limit caps the result. Defaults to 100.
	Limit int
}

// List returns jobs newest first.
func (s *Store) List(ctx context.Context, p ListParams) ([]fairway.Job, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, "SELECT "+jobColumns+` FROM fairway_job
		WHERE ($1 = '' OR group_name = $1) AND ($2 = '' OR task = $2) AND ($3 = '' OR state = $3)
		ORDER BY seq DESC LIMIT $4`, p.Group, p.Task, string(p.State), limit)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", interpretError(err))
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", interpretError(err))
	}
	return jobs, nil
}

// Logs returns the log lines of a job, oldest first. With group set, a job
// of another group is not found.
func (s *Store) Logs(ctx context.Context, group, id string) ([]fairway.LogLine, error) {
	if _, err := s.Get(ctx, group, id); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT job_id, attempt, time, level, message FROM fairway_job_log
		WHERE job_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("reading the log of job %s: %w", id, interpretError(err))
	}
	lines, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (fairway.LogLine, error) {
		var l fairway.LogLine
		err := row.Scan(&l.JobID, &l.Attempt, &l.Time, &l.Level, &l.Message)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the log of job %s: %w", id, interpretError(err))
	}
	return lines, nil
}

// AppendLogs stores log lines of jobs. Lines of jobs that do not exist are
// dropped.
func (s *Store) AppendLogs(ctx context.Context, lines []fairway.LogLine) error {
	if len(lines) == 0 {
		return nil
	}
	n := len(lines)
	ids, levels, msgs := make([]string, n), make([]string, n), make([]string, n)
	attempts := make([]int32, n)
	times := make([]time.Time, n)
	for i, l := range lines {
		ids[i], attempts[i], times[i], levels[i], msgs[i] = l.JobID, int32(l.Attempt), l.Time, l.Level, l.Message
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO fairway_job_log (job_id, attempt, time, level, message)
		SELECT l.id, l.attempt, l.time, l.level, l.message
		  FROM unnest($1::text[], $2::int[], $3::timestamptz[], $4::text[], $5::text[])
		       WITH ORDINALITY AS l (id, attempt, time, level, message, ord)
		 WHERE EXISTS (SELECT 1 FROM fairway_job j WHERE j.id = l.id)
		 ORDER BY l.ord`, ids, attempts, times, levels, msgs)
	if err != nil {
		return fmt.Errorf("storing %d log lines: %w", n, interpretError(err))
	}
	return nil
}

// Progress is a task's progress report.
type Progress struct {
	JobID    string
	Attempt  int
	Worker   string
	Progress int
}

// setProgressSQL finds rows by primary key only (see complete.sql): with
// statistics that expect few held jobs, the planner would otherwise scan an
// executor's held jobs once per report.
const setProgressSQL = `WITH p AS (
    SELECT p.id, p.progress
      FROM unnest($1::text[], $2::int[], $3::text[], $4::int[]) AS p (id, attempt, worker, progress)
     CROSS JOIN LATERAL (SELECT j.* FROM fairway_job j WHERE j.id = p.id LIMIT 1 FOR UPDATE) j
     WHERE j.attempt = p.attempt AND j.worker = p.worker AND j.state IN ('scheduled', 'running')
)
UPDATE fairway_job j SET progress = p.progress FROM p WHERE j.id = p.id`

// SetProgress records progress of running attempts.
func (s *Store) SetProgress(ctx context.Context, ps []Progress) error {
	if len(ps) == 0 {
		return nil
	}
	n := len(ps)
	ids, workers := make([]string, n), make([]string, n)
	attempts, values := make([]int32, n), make([]int32, n)
	for i, p := range ps {
		ids[i], workers[i], attempts[i], values[i] = p.JobID, p.Worker, int32(p.Attempt), int32(min(max(p.Progress, 0), 100))
	}
	_, err := s.pool.Exec(ctx, setProgressSQL,
		ids, attempts, workers, values)
	if err != nil {
		return fmt.Errorf("storing progress: %w", interpretError(err))
	}
	return nil
}

// Cancelled is the outcome of Cancel.
type Cancelled struct {
	Job fairway.Job
	// Signal is true when the job is held by an executor: it ends cancelled
	// once the executor has stopped it, so the executor must be told.
	Signal bool
}

// Cancel cancels a job. A job not yet handed to an executor ends cancelled
// at once; a scheduled or running one is marked, and ends cancelled when its
// executor reports or its lease expires. With group set, a job of another
// group is not found. Cancelling a final job is a conflict.
func (s *Store) Cancel(ctx context.Context, group, id string) (*Cancelled, error) {
	var signal bool
	job, err := s.changeJob(ctx, group, id, "cancelling", func(tx pgx.Tx, state fairway.State) error {
		var err error
		switch {
		case state.Final():
			return fairway.Conflict(id, "job %s is already %s", id, state)
		case state == fairway.StateScheduled || state == fairway.StateRunning:
			signal = true
			_, err = tx.Exec(ctx, "UPDATE fairway_job SET cancel_requested = true WHERE id = $1", id)
		default:
			_, err = tx.Exec(ctx, `WITH upd AS (
				UPDATE fairway_job SET state = 'cancelled', cancel_requested = true, finished = now()
				 WHERE id = $1 RETURNING id, task, group_name, attempt)
				INSERT INTO fairway_event (job_id, task, group_name, state, prev_state, attempt)
				SELECT id, task, group_name, 'cancelled', $2, attempt FROM upd`, id, string(state))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Cancelled{Job: *job, Signal: signal}, nil
}

// FutureDueTimes returns the distinct times at which waiting or stuck jobs
// that are not due yet become due, earliest first, at most limit of them.
func (s *Store) FutureDueTimes(ctx context.Context, limit int) ([]time.Time, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT run_at FROM fairway_job
		WHERE state IN ('waiting', 'stuck') AND run_at > now() ORDER BY run_at LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("reading due times: %w", interpretError(err))
	}
	return pgx.CollectRows(rows, pgx.RowTo[time.Time])
}

// Analyze refreshes the planner statistics of the job table (used after
// bulk loads, such as the scale benchmark's).
func (s *Store) Analyze(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, "ANALYZE fairway_job"); err != nil {
		return fmt.Errorf("analyzing fairway_job: %w", interpretError(err))
	}
	return nil
}
