package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/queue_counts.sql
	queueCountsSQL string
	//go:embed sql/executor_deregister.sql
	executorDeregisterSQL string
	//go:embed sql/executor_heartbeat.sql
	executorHeartbeatSQL string
	//go:embed sql/executor_previous.sql
	executorPreviousSQL string
	//go:embed sql/executor_register.sql
	executorRegisterSQL string
	//go:embed sql/executors_gone.sql
	executorsGoneSQL string
	//go:embed sql/executors_list.sql
	executorsListSQL string
	//go:embed sql/known_tasks.sql
	knownTasksSQL string
	//go:embed sql/live_tasks.sql
	liveTasksSQL string
)

// RegisterExecutor records an executor that is starting. If the app-id is
// already registered by another instance, alive decides whether that one
// still runs: if so the registration is refused with a conflict; if not,
// the new instance takes over (the journal's leader releases the old
// instance's jobs as lost at its next sweep). alive is called inside the
// transaction, with the row locked, so two executors starting together
// cannot both win.
func (s *Store) RegisterExecutor(ctx context.Context, e fairway.Executor, alive func(prev fairway.Executor) bool) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var prev fairway.Executor
		err := tx.QueryRow(ctx, executorPreviousSQL, e.AppID).
			Scan(&prev.AppID, &prev.Instance, &prev.Host, &prev.Slots, &prev.Tasks, &prev.Started, &prev.LastHeartbeat, &prev.State)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case prev.Instance != e.Instance && prev.State == fairway.ExecutorLive && alive(prev):
			return &fairway.Error{Code: fairway.CodeConflict, Field: "app-id", Message: fmt.Sprintf(
				"executor app-id %q is already in use by a running executor on host %q (started %s, last heartbeat %s): give each executor its own --app-id",
				e.AppID, prev.Host, prev.Started.Format(time.RFC3339), prev.LastHeartbeat.Format(time.RFC3339))}
		}
		_, err = tx.Exec(ctx, executorRegisterSQL,
			e.AppID, e.Instance, e.Host, e.Slots, e.Tasks)
		return err
	})
	if err != nil {
		return fmt.Errorf("registering executor %q: %w", e.AppID, err)
	}
	return nil
}

// Heartbeat records that an executor instance is alive, holding held
// jobs (the journal's leader keeps their holds: journal.Leader.ReleaseLost
// judges the instances this registry says are lost). It returns a
// not-found error when the instance is not the registered one (it was
// replaced or never registered) or is not live (marked gone or
// deregistered: it must register again, as its dispatch requests tell it).
func (s *Store) Heartbeat(ctx context.Context, appID, instance string, held int) error {
	tag, err := s.pool.Exec(ctx, executorHeartbeatSQL, appID, instance, held)
	if err != nil {
		return fmt.Errorf("recording the heartbeat of %q: %w", appID, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return &fairway.Error{Code: fairway.CodeNotFound, Message: fmt.Sprintf("executor %q instance %s is not registered", appID, instance)}
	}
	return nil
}

// Executors lists the registered executors, live ones first, then most
// recently seen first.
func (s *Store) Executors(ctx context.Context) ([]fairway.Executor, error) {
	rows, err := s.pool.Query(ctx, executorsListSQL)
	if err != nil {
		return nil, fmt.Errorf("listing executors: %w", interpretError(err))
	}
	execs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (fairway.Executor, error) {
		var e fairway.Executor
		err := row.Scan(&e.AppID, &e.Instance, &e.Host, &e.Slots, &e.Running, &e.Tasks, &e.Started, &e.LastHeartbeat, &e.State, &e.Left)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing executors: %w", interpretError(err))
	}
	return execs, nil
}

// KnownTasks lists the tasks that some executor registered, whether it is
// live, gone or deregistered: a submission of a task that none ever
// registered is refused. LiveTasks says which of them can run now.
func (s *Store) KnownTasks(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, knownTasksSQL)
	if err != nil {
		return nil, fmt.Errorf("listing known tasks: %w", interpretError(err))
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// LiveTasks lists the tasks that some live executor runs.
// LiveTasks are the tasks that some live executor runs.
func (s *Store) LiveTasks(ctx context.Context) ([]string, error) { return s.liveTasks(ctx) }

func (s *Store) liveTasks(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, liveTasksSQL)
	if err != nil {
		return nil, fmt.Errorf("listing live tasks: %w", interpretError(err))
	}
	tasks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing live tasks: %w", interpretError(err))
	}
	return tasks, nil
}

// DeregisterExecutor records that an executor instance shut down
// gracefully: it is no longer live, and its tasks no longer count as run.
// Its jobs are left alone: it reported them (done or released) before it
// deregistered, and those reports may still wait in the report stream; a
// job it did not report is recovered when its lease runs out. It returns a
// not-registered error when the instance is not the registered one (a
// newer instance took the app-id over); deregistering twice is no error.
func (s *Store) DeregisterExecutor(ctx context.Context, appID, instance string) error {
	tag, err := s.pool.Exec(ctx, executorDeregisterSQL, appID, instance)
	if err != nil {
		return fmt.Errorf("deregistering executor %q: %w", appID, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fairway.NotRegistered(appID, instance)
	}
	return nil
}

//go:embed sql/executor_registration.sql
var executorRegistrationSQL string

// Registration returns the slots and tasks that instance of appID
// registered, if it is the instance registered now and live; else a
// not-registered error (the executor must register again).
func (s *Store) Registration(ctx context.Context, appID, instance string) (slots int, tasks []string, err error) {
	err = s.pool.QueryRow(ctx, executorRegistrationSQL, appID, instance).Scan(&slots, &tasks)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, fairway.NotRegistered(appID, instance)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reading the registration of executor %q: %w", appID, interpretError(err))
	}
	return slots, tasks, nil
}

// MarkExecutorsGone marks gone the live executors that sent no heartbeat
// for silentFor: they died or are cut off. Their tasks no longer count as
// run; their jobs are recovered by lease expiry, as always. An executor
// marked gone is live again once it registers again. It returns the
// executors it marked.
func (s *Store) MarkExecutorsGone(ctx context.Context, silentFor time.Duration) ([]fairway.Executor, error) {
	rows, err := s.pool.Query(ctx, executorsGoneSQL, interval(silentFor))
	if err != nil {
		return nil, fmt.Errorf("marking silent executors gone: %w", interpretError(err))
	}
	gone, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (fairway.Executor, error) {
		e := fairway.Executor{State: fairway.ExecutorGone}
		err := row.Scan(&e.AppID, &e.Instance, &e.Host, &e.Tasks, &e.LastHeartbeat)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("marking silent executors gone: %w", interpretError(err))
	}
	return gone, nil
}

// MarkNoExecutor sets NoExecutor on the jobs that wait for a task no live
// executor runs.
func (s *Store) MarkNoExecutor(ctx context.Context, jobs []fairway.Job) error {
	waits := false
	for _, j := range jobs {
		waits = waits || waitsForExecutor(j.State)
	}
	if !waits {
		return nil
	}
	live, err := s.liveTasks(ctx)
	if err != nil {
		return err
	}
	for i := range jobs {
		jobs[i].NoExecutor = waitsForExecutor(jobs[i].State) && !slices.Contains(live, jobs[i].Task)
	}
	return nil
}

// waitsForExecutor tells whether a job in state waits for an executor to
// take it: not final, and not held by one.
func waitsForExecutor(state fairway.State) bool {
	return state == fairway.StatePending || state == fairway.StateWaiting || state == fairway.StateStuck
}

// scanQueueCount reads a row of queue_counts.sql.
func scanQueueCount(row pgx.CollectableRow) (fairway.QueueCount, error) {
	var q fairway.QueueCount
	err := row.Scan(&q.Group, &q.Task, &q.State, &q.Jobs, &q.OldestDueSeconds)
	return q, err
}
