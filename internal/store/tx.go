package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/notify_jobs.sql
	notifyJobsSQL string
	//go:embed sql/listen_jobs.sql
	listenJobsSQL string
)

// TxOptions are the public store.TxOptions: the coordinators' submission
// settings that InsertTx applies itself, since no coordinator sees these
// submissions.
type TxOptions struct {
	// MaxArgsSize bounds a job's args. Defaults to
	// fairway.DefaultMaxArgsSize (1 MiB).
	MaxArgsSize int64
	// Retries is the max_retries of a job submitted without one. Defaults
	// to 5, the coordinators' default.
	Retries int
}

// InsertTx is the public store.InsertTx (see there). A database of the
// row engine (before 2026-11-30) is refused: errRowEngine says what to
// do.
func InsertTx(ctx context.Context, tx pgx.Tx, opts TxOptions, subs ...fairway.Submission) ([]string, error) {
	if opts.MaxArgsSize <= 0 {
		opts.MaxArgsSize = fairway.DefaultMaxArgsSize
	}
	if opts.Retries <= 0 {
		opts.Retries = 5
	}
	for i := range subs {
		if err := subs[i].Normalize("", "", opts.MaxArgsSize, opts.Retries); err != nil {
			return nil, fmt.Errorf("submission %d: %w", i, err)
		}
	}
	if err := onJournalTx(ctx, tx); err != nil {
		return nil, fmt.Errorf("reading the database's engine: %w", interpretError(err))
	}
	return insertJournalTx(ctx, tx, subs)
}

// insertJournalTx appends the submissions as one submitted row of the
// journal in tx, their ids taken for good (journal.Submit); the tail
// reads each transaction's rows once it has ended (docs/journal.md, "The
// tail and the order of rows"). A dependency on a job never submitted is
// refused here.
func insertJournalTx(ctx context.Context, tx pgx.Tx, subs []fairway.Submission) ([]string, error) {
	unknown, err := UnknownDependencies(ctx, tx, subs)
	if err != nil {
		return nil, err
	}
	for i := range subs {
		if unknown[i] != nil {
			return nil, fmt.Errorf("submission %d: %w", i, unknown[i])
		}
	}
	items := make([]journal.Item, len(subs))
	ids := make([]string, len(subs))
	for i, sub := range subs {
		items[i], ids[i] = journal.ItemOf(sub), sub.ID
	}
	if _, err := journal.Submit(ctx, tx, 0, items); err != nil {
		return nil, fmt.Errorf("storing jobs in the caller's transaction: %w", interpretError(err))
	}
	if _, err := tx.Exec(ctx, notifyJobsSQL); err != nil {
		return nil, fmt.Errorf("notifying the coordinators: %w", interpretError(err))
	}
	return ids, nil
}

// ListenJobs calls notify each time a transaction that stored jobs with
// InsertTx commits, until ctx ends; it holds one connection of its own,
// and connects again after an error (PostgreSQL restarted, say), calling
// notify then too, since jobs may have come meanwhile.
func (s *Store) ListenJobs(ctx context.Context, notify func()) {
	failing := false // warn once per outage, not every second
	for ctx.Err() == nil {
		err := s.listenJobs(ctx, notify, &failing)
		if ctx.Err() != nil {
			return
		}
		level := slog.LevelWarn
		if failing {
			level = slog.LevelDebug
		}
		failing = true
		s.log.Log(ctx, level, "listening for jobs stored in callers' transactions; trying again every second", "error", err)
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		notify()
	}
}

func (s *Store) listenJobs(ctx context.Context, notify func(), failing *bool) error {
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return interpretError(err)
	}
	// The connection stays in LISTEN: it never goes back to the pool.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, listenJobsSQL); err != nil {
		return interpretError(err)
	}
	if *failing {
		s.log.Info("listening for jobs stored in callers' transactions again")
		*failing = false
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if errors.Is(err, context.Canceled) || ctx.Err() != nil {
				return nil
			}
			return interpretError(err)
		}
		notify()
	}
}
