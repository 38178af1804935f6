package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/job_state_lock.sql
	jobStateLockSQL string
	//go:embed sql/set_priority.sql
	setPrioritySQL string
)

// ExpiredError is the error of a job that expired before it started.
const ExpiredError = "expired"

var (
	//go:embed sql/trigger_pending.sql
	triggerPendingSQL string
	//go:embed sql/expire_jobs.sql
	expireJobsSQL string
	//go:embed sql/release_job.sql
	releaseJobSQL string
	//go:embed sql/retry_job.sql
	retryJobSQL string
	//go:embed sql/job_depends_on.sql
	jobDependsOnSQL string
)

// TriggerPending releases the pending jobs whose trigger_after has come:
// they become waiting, due now. It handles at most limit jobs per call.
func (s *Store) TriggerPending(ctx context.Context, limit int) ([]Applied, error) {
	return s.timed(ctx, "releasing triggered pending jobs", triggerPendingSQL, limit)
}

// ExpireJobs fails the jobs not started yet (pending, waiting or stuck)
// whose expires_at has passed, with the error "expired". It handles at
// most limit jobs per call.
func (s *Store) ExpireJobs(ctx context.Context, limit int) ([]Applied, error) {
	return s.timed(ctx, "expiring jobs", expireJobsSQL, limit, ExpiredError)
}

func (s *Store) timed(ctx context.Context, what, query string, args ...any) ([]Applied, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, interpretError(err))
	}
	applied, err := collectApplied(rows)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, interpretError(err))
	}
	return applied, nil
}

// Release releases a pending job by hand: it becomes waiting, due now.
// A job that is not pending is a conflict, and so is one that waits for
// its dependencies (they release it).
func (s *Store) Release(ctx context.Context, group, id string) (*fairway.Job, error) {
	return s.changeJob(ctx, group, id, "releasing", func(tx pgx.Tx, state fairway.State) error {
		if state != fairway.StatePending {
			return fairway.Conflict(id, "job %s is %s, not pending: only pending jobs can be released", id, state)
		}
		var deps []string
		if err := tx.QueryRow(ctx, jobDependsOnSQL, group, id).Scan(&deps); err != nil {
			return err
		}
		if len(deps) > 0 {
			return fairway.Conflict(id, "job %s waits for its dependencies (%s): it is released when they have all succeeded, or cancel it", id, strings.Join(deps, ", "))
		}
		_, err := tx.Exec(ctx, releaseJobSQL, id, group)
		return err
	})
}

// Retry runs a failed or cancelled job again, by hand: it becomes
// waiting, due now, with its retries counted afresh (Oban's and River's
// retry). A job with dependencies becomes pending instead, and waits for
// them again: the caller resolves it (ResolveDependents). Other states are
// a conflict.
func (s *Store) Retry(ctx context.Context, group, id string) (*fairway.Job, error) {
	return s.changeJob(ctx, group, id, "retrying", func(tx pgx.Tx, state fairway.State) error {
		if state != fairway.StateFailed && state != fairway.StateCancelled {
			return fairway.Conflict(id, "job %s is %s: only failed or cancelled jobs can be retried", id, state)
		}
		_, err := tx.Exec(ctx, retryJobSQL, id, group, string(state))
		return err
	})
}

// SetPriority changes the priority of a job that has not been handed to
// an executor yet (pending, waiting or stuck). Other states are a conflict.
func (s *Store) SetPriority(ctx context.Context, group, id string, prio fairway.Priority) (*fairway.Job, error) {
	if prio != fairway.PriorityHigh && prio != fairway.PriorityLow {
		return nil, fairway.Invalid("priority", "unknown priority %q: use \"high\" or \"low\"", prio)
	}
	return s.changeJob(ctx, group, id, "re-prioritising", func(tx pgx.Tx, state fairway.State) error {
		switch state {
		case fairway.StatePending, fairway.StateWaiting, fairway.StateStuck:
		default:
			return fairway.Conflict(id, "job %s is %s: only pending, waiting or stuck jobs can be re-prioritised", id, state)
		}
		_, err := tx.Exec(ctx, setPrioritySQL, id, string(prio), group)
		return err
	})
}

// changeJob locks the job id of group, lets change act on it by its state,
// and returns the job as it is then. A job of another group is not found.
func (s *Store) changeJob(ctx context.Context, group, id, what string, change func(pgx.Tx, fairway.State) error) (*fairway.Job, error) {
	var job fairway.Job
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var state fairway.State
		err := tx.QueryRow(ctx, jobStateLockSQL, id, group).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return fairway.NotFound(id)
		}
		if err != nil {
			return err
		}
		if err := change(tx, state); err != nil {
			return err
		}
		job, err = scanJob(tx.QueryRow(ctx, "SELECT "+jobColumns+" FROM fairway_job WHERE group_name = $2 AND id = $1", id, group))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s job %s: %w", what, id, err)
	}
	return &job, nil
}
