// Package store is the part of Fairway's PostgreSQL store that Go
// programs use directly: open the database, migrate it, hand it to a
// coordinator (coordinator.New), and store jobs in the program's own
// transaction (InsertTx).
//
// The engine behind it (claims, outcomes, the outbox, retention…) lives in
// internal/store and is no part of Fairway's API: only the coordinators
// call it.
package store

import (
	"context"
	"log/slog"

	"github.com/fairwayhq/fairway"
	istore "github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storeaccess"
	"github.com/jackc/pgx/v5"
)

func init() {
	storeaccess.Engine = func(public any) *istore.Store { return public.(*Store).engine }
	storeaccess.Public = func(engine *istore.Store) any { return &Store{engine: engine} }
}

// Store is a connection pool to Fairway's PostgreSQL database. Pass it to
// coordinator.New; close it after the coordinators that use it have
// stopped.
type Store struct {
	engine *istore.Store
}

// Options configures Open.
type Options struct {
	// MaxConns caps the connection pool. Defaults to 10.
	MaxConns int32
	// Logger receives the store's own logs. Defaults to discard.
	Logger *slog.Logger
}

// Open connects to the database at url. It does not migrate: call Migrate.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	e, err := istore.Open(ctx, url, istore.Options{MaxConns: opts.MaxConns, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	return &Store{engine: e}, nil
}

// Migrate applies the embedded migrations that the database lacks, in
// order, under an advisory lock (coordinators starting together apply
// each once). It returns the versions it applied.
func (s *Store) Migrate(ctx context.Context) ([]int, error) { return s.engine.Migrate(ctx) }

// Close closes the connection pool.
func (s *Store) Close() { s.engine.Close() }

// TxOptions are the coordinators' submission settings that InsertTx
// applies itself, since no coordinator sees these submissions.
type TxOptions struct {
	// MaxArgsSize bounds a job's args. Defaults to
	// fairway.DefaultMaxArgsSize (1 MiB).
	MaxArgsSize int64
	// Retries is the max_retries of a job submitted without one. Defaults
	// to 5, the coordinators' default.
	Retries int
}

// InsertTx stores jobs in the caller's own transaction on Fairway's
// database (River's InsertTx): they exist exactly when tx commits, as one
// submitted row of the journal, appended in tx with their ids taken for
// good, and the coordinators are woken at the commit (LISTEN/NOTIFY), not
// at their next poll; the partition's leader reads the row once tx
// commits, never if it rolls back, and publishes the jobs' events. Each
// submission is validated as a coordinator would, but without the
// coordinators' quotas and without the check that some executor runs its
// task (a job of a task nobody runs waits, marked no_executor). It
// returns the jobs' ids in order; a submission refused (invalid, or
// depending on a job never submitted in its group) fails the whole call
// with an error naming it, and the caller should roll back. A job whose
// id its group already uses is not stored again: its id is returned as
// for a new one, as an idempotent submit. What the leader decides is not
// known in tx: a submission whose tracker a live job holds is rejected
// when the leader reads it (a rejected event says so).
func InsertTx(ctx context.Context, tx pgx.Tx, opts TxOptions, subs ...fairway.Submission) ([]string, error) {
	return istore.InsertTx(ctx, tx, istore.TxOptions(opts), subs...)
}
