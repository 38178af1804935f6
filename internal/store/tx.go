package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/cluster_here.sql
	clusterHereSQL string
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
	// Each group's jobs in its partition's journal, which must be in
	// this database.
	var count int
	var here []int
	switch err := tx.QueryRow(ctx, clusterHereSQL).Scan(&count, &here); {
	case errors.Is(err, pgx.ErrNoRows):
		count, here = 1, []int{0} // a new database: one partition, until a coordinator records the cluster
	case err != nil:
		return nil, fmt.Errorf("reading the cluster's partitions: %w", interpretError(err))
	}
	byPart := map[int][]journal.Item{}
	var order []int
	ids := make([]string, len(subs))
	for i, sub := range subs {
		p := partition.Of(sub.Group, count)
		if !slices.Contains(here, p) {
			return nil, fmt.Errorf("submission %d: %w", i, fairway.Invalid("group",
				"%q is in partition %d, whose journal is in another database than this transaction's: submit its jobs through NATS, or in a transaction of that database", sub.Group, p))
		}
		if _, ok := byPart[p]; !ok {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], journal.ItemOf(sub))
		ids[i] = sub.ID
	}
	for _, p := range order {
		if _, err := journal.Submit(ctx, tx, int16(p), byPart[p]); err != nil { //nolint:gosec // G115: at most partition.Max
			return nil, fmt.Errorf("storing jobs in the caller's transaction: %w", interpretError(err))
		}
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
