// Operators' and tenants' control of one job: cancelling it.

package store

import (
	"context"
	_ "embed"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/cancel_request.sql
	cancelRequestSQL string
)

//go:embed sql/cancel_job.sql
var cancelJobSQL string

// Cancelled is the outcome of Cancel.
type Cancelled struct {
	Job fairway.Job
	// Signal is true when the job is held by an executor: it ends cancelled
	// once the executor has stopped it, so the executor must be told.
	Signal bool
}

// Cancel cancels a job. A job not yet handed to an executor ends cancelled
// at once; a scheduled or running one is marked, and ends cancelled when its
// executor reports or its lease expires. A job of another group is not
// found. Cancelling a final job is a conflict.
func (s *Store) Cancel(ctx context.Context, group, id string) (*Cancelled, error) {
	var signal bool
	job, err := s.changeJob(ctx, group, id, "cancelling", func(tx pgx.Tx, state fairway.State) error {
		var err error
		switch {
		case state.Final():
			return fairway.Conflict(id, "job %s is already %s", id, state)
		case state == fairway.StateScheduled || state == fairway.StateRunning:
			signal = true
			_, err = tx.Exec(ctx, cancelRequestSQL, id, group)
		default:
			_, err = tx.Exec(ctx, cancelJobSQL, id, string(state), group)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Cancelled{Job: *job, Signal: signal}, nil
}
