package store

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/db_now.sql
	dbNowSQL string
	//go:embed sql/periodic_advance.sql
	periodicAdvanceSQL string
	//go:embed sql/periodic_delete.sql
	periodicDeleteSQL string
	//go:embed sql/periodic_next_run.sql
	periodicNextRunSQL string
	//go:embed sql/periodic_owned.sql
	periodicOwnedSQL string
	//go:embed sql/periodic_unmark.sql
	periodicUnmarkSQL string
)

//go:embed sql/periodic_event.sql
var periodicEventSQL string

// PeriodicTask is fairway.PeriodicTask.
type PeriodicTask = fairway.PeriodicTask

const periodicColumns = `id, enabled, task, group_name, args, subject, submitter, priority, timer, nextrun,
	coalesce(worker, ''), marked, created`

func scanPeriodic(row pgx.Row) (PeriodicTask, error) {
	var p PeriodicTask
	var args []byte
	err := row.Scan(&p.ID, &p.Enabled, &p.Task, &p.Group, &args, &p.Subject, &p.Submitter, &p.Priority, &p.Timer, &p.NextRun,
		&p.MarkedBy, &p.Marked, &p.Created)
	p.Args = args
	return p, err
}

func collectPeriodic(rows pgx.Rows, err error) ([]PeriodicTask, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (PeriodicTask, error) { return scanPeriodic(row) })
}

// SavePeriodic creates a periodic task, or replaces the one with its id
// (keeping created). The caller has validated it and computed NextRun.
func (s *Store) SavePeriodic(ctx context.Context, p PeriodicTask) (*PeriodicTask, error) {
	if len(p.Args) == 0 {
		p.Args = json.RawMessage("{}")
	}
	saved, err := scanPeriodic(s.pool.QueryRow(ctx, `INSERT INTO fairway_periodic_task
		(id, enabled, task, group_name, args, subject, submitter, priority, timer, nextrun)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (id) DO UPDATE SET enabled = excluded.enabled, task = excluded.task, group_name = excluded.group_name,
			args = excluded.args, subject = excluded.subject, submitter = excluded.submitter, priority = excluded.priority,
			timer = excluded.timer, nextrun = excluded.nextrun
		RETURNING `+periodicColumns, p.ID, p.Enabled, p.Task, p.Group, []byte(p.Args), p.Subject, p.Submitter, string(p.Priority), p.Timer, p.NextRun))
	if err != nil {
		return nil, fmt.Errorf("saving periodic task %s: %w", p.ID, interpretError(err))
	}
	return &saved, nil
}

// GetPeriodic returns a periodic task.
func (s *Store) GetPeriodic(ctx context.Context, id string) (*PeriodicTask, error) {
	p, err := scanPeriodic(s.pool.QueryRow(ctx, "SELECT "+periodicColumns+" FROM fairway_periodic_task WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &fairway.Error{Code: fairway.CodeNotFound, Field: "id", Message: fmt.Sprintf("no periodic task %q", id)}
	}
	if err != nil {
		return nil, fmt.Errorf("reading periodic task %s: %w", id, interpretError(err))
	}
	return &p, nil
}

// ListPeriodic lists the periodic tasks by id.
func (s *Store) ListPeriodic(ctx context.Context) ([]PeriodicTask, error) {
	ps, err := collectPeriodic(s.pool.Query(ctx, "SELECT "+periodicColumns+" FROM fairway_periodic_task ORDER BY id"))
	if err != nil {
		return nil, fmt.Errorf("listing periodic tasks: %w", interpretError(err))
	}
	return ps, nil
}

// DeletePeriodic deletes a periodic task; its jobs stay.
func (s *Store) DeletePeriodic(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, periodicDeleteSQL, id)
	if err != nil {
		return fmt.Errorf("deleting periodic task %s: %w", id, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return &fairway.Error{Code: fairway.CodeNotFound, Field: "id", Message: fmt.Sprintf("no periodic task %q", id)}
	}
	return nil
}

// Now is PostgreSQL's clock: the time periodic tasks follow, whatever the
// host clocks of the coordinators say.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, dbNowSQL).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("reading PostgreSQL's clock: %w", interpretError(err))
	}
	return now, nil
}

// NextPeriodicRun is the earliest nextrun of the enabled periodic tasks.
func (s *Store) NextPeriodicRun(ctx context.Context) (time.Time, bool, error) {
	var next *time.Time
	if err := s.pool.QueryRow(ctx, periodicNextRunSQL).Scan(&next); err != nil {
		return time.Time{}, false, fmt.Errorf("reading the next periodic run: %w", interpretError(err))
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return *next, true, nil
}

// MarkDuePeriodic marks for worker the enabled periodic tasks due at now
// (nextrun ≤ now) that no one has marked, or whose mark is older than
// stale (its coordinator died). Only one worker can mark a task.
func (s *Store) MarkDuePeriodic(ctx context.Context, coordinator string, now time.Time, stale time.Duration, limit int) ([]PeriodicTask, error) {
	ps, err := collectPeriodic(s.pool.Query(ctx, `UPDATE fairway_periodic_task SET worker = $1, marked = $2
		WHERE id IN (SELECT id FROM fairway_periodic_task
		              WHERE enabled AND nextrun <= $2 AND (marked IS NULL OR marked < $2 - $3::interval)
		              ORDER BY nextrun LIMIT $4 FOR UPDATE SKIP LOCKED)
		RETURNING `+periodicColumns, coordinator, now, interval(stale), limit))
	if err != nil {
		return nil, fmt.Errorf("marking due periodic tasks: %w", interpretError(err))
	}
	return ps, nil
}

// Fired is what firing a periodic task did.
type Fired struct {
	// JobID is the submitted job, or the previous job that made this run
	// skip.
	JobID   string
	Skipped bool
}

// FirePeriodic fires p's due time, marked by coordinator: unless its
// previous job has not ended (previous: the unfinished job that holds the
// task's tracker in its group, as the partition's state holds it, "" for
// none: journal.Leader.TrackerHolder), job jobID is appended to the
// journal (a submitted row) in the transaction that advances the task,
// with its fired event; else the run is skipped, with a skipped event
// naming previous. A job submitted with the task's id as its tracker
// between the read of previous and the fold of the new job's row (by a
// client, not by a firing: those are marked) has the fold reject the new
// one, saying so in its rejected event. It returns nil when another
// coordinator holds the task's mark.
//
// jobs is the database of the group's partition (nil: this one). When it
// is another, the job is appended there first, in a transaction of its
// own, while coordinator's mark holds; this database's transaction then
// advances the task. A coordinator that dies between the two has the
// task fired again once its mark goes stale: that run is at least once,
// not exactly once.
func (s *Store) FirePeriodic(ctx context.Context, coordinator string, p PeriodicTask, jobID string, retries int, nextRun time.Time, previous string, jobs *Store) (*Fired, error) {
	var sub fairway.Submission
	if previous == "" {
		sub = fairway.Submission{ID: jobID, Task: p.Task, Group: p.Group, Args: p.Args, Subject: p.Subject,
			Submitter: p.Submitter, Priority: p.Priority, Tracker: p.ID, MaxRetries: &retries}
		if err := sub.Normalize("", "", int64(len(p.Args))+1, 0); err != nil {
			return nil, fmt.Errorf("firing periodic task %s: %w", p.ID, err)
		}
	}
	elsewhere := jobs != nil && jobs != s
	owned := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) error {
		var mine bool
		err := q.QueryRow(ctx, periodicOwnedSQL, p.ID, coordinator).Scan(&mine)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !mine) {
			return errNotMine
		}
		return err
	}
	var out Fired
	err := func() error {
		if previous != "" || !elsewhere {
			return nil
		}
		if err := owned(s.pool); err != nil {
			return err
		}
		return jobs.inTx(ctx, func(tx pgx.Tx) error {
			_, err := insertJournalTx(ctx, tx, []fairway.Submission{sub})
			return err
		})
	}()
	if err == nil {
		err = s.inTx(ctx, func(tx pgx.Tx) error {
			if err := owned(tx); err != nil {
				return err
			}
			if previous != "" {
				out.JobID, out.Skipped = previous, true
				_, err := tx.Exec(ctx, periodicEventSQL, previous, p.Task, p.Group, string(fairway.StateSkipped), p.ID,
					fmt.Sprintf("periodic task %s: its previous job %s has not ended; this run is skipped", p.ID, previous))
				if err != nil {
					return err
				}
			} else {
				if !elsewhere {
					if _, err := insertJournalTx(ctx, tx, []fairway.Submission{sub}); err != nil {
						return err
					}
				}
				out.JobID = jobID
				if _, err := tx.Exec(ctx, periodicEventSQL, jobID, p.Task, p.Group, string(fairway.StateFired), p.ID, nil); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, periodicAdvanceSQL, p.ID, nextRun)
			return err
		})
	}
	if errors.Is(err, errNotMine) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("firing periodic task %s: %w", p.ID, interpretError(err))
	}
	return &out, nil
}

var errNotMine = errors.New("the periodic task is marked by another coordinator")

// UnmarkPeriodic clears worker's mark on a task it could not fire (say,
// its timer has no next time), setting nextrun and enabled.
func (s *Store) UnmarkPeriodic(ctx context.Context, coordinator, id string, nextRun time.Time, enabled bool) error {
	_, err := s.pool.Exec(ctx, periodicUnmarkSQL, id, coordinator, nextRun, enabled)
	if err != nil {
		return fmt.Errorf("unmarking periodic task %s: %w", id, interpretError(err))
	}
	return nil
}
