package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/complete.sql
	completeSQL string
	//go:embed sql/mark_running.sql
	markRunningSQL string
)

// Outcome kinds that only the coordinators produce (the others are the
// executor's, see events.Outcome*).
const (
	// OutcomeLost: the executor died (lease expired) or restarted. The
	// attempt counts as failed; the job is due again at once.
	OutcomeLost = "lost"
)

// Attempt names one run of a job by one executor.
type Attempt struct {
	JobID   string
	Attempt int
	Worker  string
}

// Outcome is how an attempt ended.
type Outcome struct {
	Attempt
	// Kind is success, error, permanent, cancelled, released or lost.
	Kind   string
	Result []byte
	Error  string
	// StartedAt, when set, is when the attempt started: its start was
	// reported along with its end, and is recorded with it.
	StartedAt *time.Time
}

// Applied is an outcome that changed its job.
type Applied struct {
	JobID string
	State fairway.State
	// RunAt is when a waiting or stuck job becomes due.
	RunAt time.Time
}

// MarkRunning records that executors started attempts. Reports about
// attempts that are no longer current change nothing.
func (s *Store) MarkRunning(ctx context.Context, started []Attempt) error {
	if len(started) == 0 {
		return nil
	}
	ids, attempts, workers := attemptArrays(started)
	if _, err := s.pool.Exec(ctx, markRunningSQL, ids, attempts, workers); err != nil {
		return fmt.Errorf("marking %d jobs running: %w", len(started), interpretError(err))
	}
	return nil
}

// Complete applies outcomes in one transaction. An outcome applies only if
// its attempt is the job's current one and still held by that executor; the
// result lists those that applied, in order.
func (s *Store) Complete(ctx context.Context, outcomes []Outcome, retryDelay time.Duration) ([]Applied, error) {
	if len(outcomes) == 0 {
		return nil, nil
	}
	var applied []Applied
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		applied, err = complete(ctx, tx, outcomes, retryDelay)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("completing %d jobs: %w", len(outcomes), err)
	}
	return applied, nil
}

func complete(ctx context.Context, tx pgx.Tx, outcomes []Outcome, retryDelay time.Duration) ([]Applied, error) {
	n := len(outcomes)
	atts := make([]Attempt, n)
	kinds, errs := make([]string, n), make([]string, n)
	results := make([][]byte, n)
	started := make([]*time.Time, n)
	for i, o := range outcomes {
		atts[i], kinds[i], results[i], errs[i], started[i] = o.Attempt, o.Kind, o.Result, o.Error, o.StartedAt
	}
	ids, attempts, workers := attemptArrays(atts)
	rows, err := tx.Query(ctx, completeSQL, ids, attempts, workers, kinds, results, errs, interval(retryDelay), started)
	if err != nil {
		return nil, err
	}
	return collectApplied(rows)
}

// collectApplied reads rows of (id, state, run_at).
func collectApplied(rows pgx.Rows) ([]Applied, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Applied, error) {
		var a Applied
		err := row.Scan(&a.JobID, &a.State, &a.RunAt)
		return a, err
	})
}

func attemptArrays(as []Attempt) (ids []string, attempts []int32, workers []string) {
	ids, attempts, workers = make([]string, len(as)), make([]int32, len(as)), make([]string, len(as))
	for i, a := range as {
		ids[i], attempts[i], workers[i] = a.JobID, int32(a.Attempt), a.Worker
	}
	return ids, attempts, workers
}

// ExpireLeases ends as lost the attempts whose lease ran out while their
// executor went silent too (no heartbeat for a lease): it died or lost its
// connection. Each counts as a failed attempt, and the job is due again at
// once, or failed when its retries are used up. An attempt whose executor
// still sends heartbeats is left alone a while longer, since its end may be
// waiting in the report stream behind others (an overloaded coordinator);
// after lease × staleLeaseFactor it is expired all the same (say, a dispatch
// reply that never reached the executor). It handles at most limit jobs
// per call and returns what it changed.
func (s *Store) ExpireLeases(ctx context.Context, limit int, lease, retryDelay time.Duration) ([]Applied, error) {
	return s.loseAttempts(ctx, `SELECT j.id, j.attempt, j.worker FROM fairway_job j
		LEFT JOIN fairway_executor e ON e.app_id = j.worker
		WHERE j.state IN ('scheduled', 'running') AND j.lease_until < now()
		  AND (e.last_heartbeat IS NULL OR e.last_heartbeat < now() - $2::interval OR j.lease_until < now() - $3::interval)
		ORDER BY j.lease_until LIMIT $1 FOR UPDATE OF j SKIP LOCKED`, retryDelay, "executor lost: its lease expired without a heartbeat",
		limit, interval(lease), interval(lease*(staleLeaseFactor-1)))
}

// staleLeaseFactor: an attempt whose executor is alive but does not hold
// it any more is expired after this many leases.
const staleLeaseFactor = 3

// ReleaseWorker ends every attempt held by the executor appID as lost: used
// when an executor restarts under the same app-id (Docspell's rule: its old
// jobs are released at once).
func (s *Store) ReleaseWorker(ctx context.Context, appID string, retryDelay time.Duration) ([]Applied, error) {
	return s.loseAttempts(ctx, `SELECT id, attempt, worker FROM fairway_job
		WHERE state IN ('scheduled', 'running') AND worker = $1
		FOR UPDATE SKIP LOCKED`, retryDelay, "executor lost: it restarted", appID)
}

func (s *Store) loseAttempts(ctx context.Context, query string, retryDelay time.Duration, reason string, args ...any) ([]Applied, error) {
	var applied []Applied
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		applied, err = loseAttempts(ctx, tx, query, retryDelay, reason, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("releasing lost jobs: %w", err)
	}
	return applied, nil
}

func loseAttempts(ctx context.Context, tx pgx.Tx, query string, retryDelay time.Duration, reason string, args ...any) ([]Applied, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	lost, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Outcome, error) {
		o := Outcome{Kind: OutcomeLost, Error: reason}
		err := row.Scan(&o.JobID, &o.Attempt.Attempt, &o.Worker)
		return o, err
	})
	if err != nil || len(lost) == 0 {
		return nil, err
	}
	return complete(ctx, tx, lost, retryDelay)
}

// ExtendLeases renews the leases of the jobs an executor says it holds.
func (s *Store) ExtendLeases(ctx context.Context, worker string, jobIDs []string, lease time.Duration) error {
	if len(jobIDs) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `UPDATE fairway_job SET lease_until = now() + $3::interval
		WHERE worker = $1 AND id = ANY ($2) AND state IN ('scheduled', 'running')`, worker, jobIDs, interval(lease))
	if err != nil {
		return fmt.Errorf("extending leases of %q: %w", worker, interpretError(err))
	}
	return nil
}
