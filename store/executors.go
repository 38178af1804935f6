package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

// RegisterExecutor records an executor that is starting. If the app-id is
// already registered by another instance, alive decides whether that one
// still runs: if so the registration is refused with a conflict; if not,
// the new instance takes over and the old instance's jobs are released as
// lost (returned). alive is called inside the transaction, with the row
// locked, so two executors starting together cannot both win.
func (s *Store) RegisterExecutor(ctx context.Context, e fairway.Executor, retryDelay time.Duration, alive func(prev fairway.Executor) bool) ([]Applied, error) {
	var released []Applied
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var prev fairway.Executor
		err := tx.QueryRow(ctx, `SELECT app_id, instance, host, slots, tasks, started, last_heartbeat
			FROM fairway_executor WHERE app_id = $1 FOR UPDATE`, e.AppID).
			Scan(&prev.AppID, &prev.Instance, &prev.Host, &prev.Slots, &prev.Tasks, &prev.Started, &prev.LastHeartbeat)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case prev.Instance != e.Instance && alive(prev):
			return &fairway.Error{Code: fairway.CodeConflict, Field: "app-id", Message: fmt.Sprintf(
				"executor app-id %q is already in use by a running executor on host %q (started %s, last heartbeat %s): give each executor its own --app-id",
				e.AppID, prev.Host, prev.Started.Format(time.RFC3339), prev.LastHeartbeat.Format(time.RFC3339))}
		case prev.Instance != e.Instance:
			released, err = loseAttempts(ctx, tx, `SELECT group_name, id, attempt, worker, worker_instance FROM fairway_job
				WHERE state IN ('scheduled', 'running') AND worker = $1 FOR UPDATE`, retryDelay, "executor lost: it restarted", e.AppID)
			if err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO fairway_executor (app_id, instance, host, slots, tasks, started, last_heartbeat)
			VALUES ($1, $2, $3, $4, $5, now(), now())
			ON CONFLICT (app_id) DO UPDATE SET instance = $2, host = $3, slots = $4, tasks = $5,
				started = now(), last_heartbeat = now(), running = 0`,
			e.AppID, e.Instance, e.Host, e.Slots, e.Tasks)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("registering executor %q: %w", e.AppID, err)
	}
	return released, nil
}

// Heartbeat records that an executor instance is alive and renews the
// leases of the jobs it holds (those held by another instance keep theirs).
// It returns a not-found error when the instance is not the registered one
// (it was replaced or never registered).
func (s *Store) Heartbeat(ctx context.Context, appID, instance string, jobs []fairway.JobRef, lease time.Duration) error {
	tag, err := s.pool.Exec(ctx, `UPDATE fairway_executor SET last_heartbeat = now(), running = $3
		WHERE app_id = $1 AND instance = $2`, appID, instance, len(jobs))
	if err != nil {
		return fmt.Errorf("recording the heartbeat of %q: %w", appID, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return &fairway.Error{Code: fairway.CodeNotFound, Message: fmt.Sprintf("executor %q instance %s is not registered", appID, instance)}
	}
	return s.ExtendLeases(ctx, appID, instance, jobs, lease)
}

// Executors lists the registered executors, most recently seen first.
func (s *Store) Executors(ctx context.Context) ([]fairway.Executor, error) {
	rows, err := s.pool.Query(ctx, `SELECT app_id, instance, host, slots, running, tasks, started, last_heartbeat
		FROM fairway_executor ORDER BY last_heartbeat DESC`)
	if err != nil {
		return nil, fmt.Errorf("listing executors: %w", interpretError(err))
	}
	execs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (fairway.Executor, error) {
		var e fairway.Executor
		err := row.Scan(&e.AppID, &e.Instance, &e.Host, &e.Slots, &e.Running, &e.Tasks, &e.Started, &e.LastHeartbeat)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing executors: %w", interpretError(err))
	}
	return execs, nil
}

// KnownTasks lists the tasks that some registered executor can run.
func (s *Store) KnownTasks(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, "SELECT DISTINCT unnest(tasks) AS t FROM fairway_executor ORDER BY t")
	if err != nil {
		return nil, fmt.Errorf("listing known tasks: %w", interpretError(err))
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
