// Package store is the engine that keeps Fairway's jobs in PostgreSQL: the
// single source of truth for job state. Its methods take and return domain
// types, and pgx errors never leave it. It is internal: Go programs use the
// public package store (opening, migrating, InsertTx), which wraps it, and
// the coordinator reaches this engine through internal/storeaccess. The
// tools (internal/bench, internal/chaos) read and write Fairway's tables
// only through it, so that a schema change breaks them at compile time or
// in this package's tests, not silently.
//
// Every state change writes its lifecycle event into an outbox table in the
// same transaction, so an event exists for every committed change even if
// the process dies right after the commit.
package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/secret"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is Fairway's PostgreSQL store.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

// Options configures Open.
type Options struct {
	// MaxConns caps the connection pool. Defaults to 10.
	MaxConns int32
	// Logger receives the store's own logs. Defaults to discard.
	Logger *slog.Logger
}

// connectTimeout bounds a new connection's set-up (TCP, TLS and the
// authentication) when the database URL names no connect_timeout: pgx,
// like libpq, waits for ever, and a primary that stopped answering
// without closing its connections (a host gone, a network cut) held
// every call that needed a new connection for minutes.
var connectTimeout = 10 * time.Second

// keepAlive probes an idle connection, one waiting for an answer
// included, after 15 s of silence, every 5 s, and drops it after 3
// probes unanswered: a connection to a primary cut off fails within
// about 30 s, where the operating system's defaults took minutes.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// poolConfig is the pool's configuration of url: Open's.
func poolConfig(url string, opts Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %s", secret.Mask(err.Error())) // pgconn masks only the passwords it recognises
	}
	cfg.MaxConns = opts.MaxConns
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 10
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	d := &net.Dialer{KeepAliveConfig: keepAlive}
	cfg.ConnConfig.DialFunc = d.DialContext
	return cfg, nil
}

// Open connects to the database at url. It does not migrate: call Migrate.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := poolConfig(url, opts)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", redact(cfg), interpretError(err))
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{pool: pool, log: log}, nil
}

func redact(cfg *pgxpool.Config) string {
	return fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
}

// Close closes the connection pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return interpretError(s.pool.Ping(ctx)) }

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return interpretError(pgx.BeginFunc(ctx, s.pool, fn))
}

// abandonTx leaves no transaction open on a pooled connection after a
// failed one: it rolls back, or closes the connection if it cannot.
func abandonTx(ctx context.Context, conn *pgxpool.Conn) {
	if _, err := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
	}
}

// Pool is the store's connection pool, for the journal engine
// (internal/journal), which runs its own statements on the same database.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Where names the database as host:port/name, without its credentials.
func (s *Store) Where() string { return redact(s.pool.Config()) }

// Interpret turns pgx and PostgreSQL errors into Fairway's, as the
// store's own methods do (interpretError): for the journal engine's.
func Interpret(err error) error { return interpretError(err) }

// Unreachable says whether err means PostgreSQL could not be reached: no
// connection made (refused, or timed out, as to a host gone), the
// connection lost, the server shutting down or out of connections
// (journal.LeaderConfig.Unreachable).
func Unreachable(err error) bool {
	return err != nil && (errors.As(err, new(*pgconn.ConnectError)) || errors.Is(interpretError(err), fairway.ErrUnavailable))
}

// interpretError turns pgx and PostgreSQL errors into Fairway's: a
// connection failure is unavailable, the rest keep their text.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	var fe *fairway.Error
	if errors.As(err, &fe) {
		return err
	}
	// Not tried (the last try could not reach it), or no answer in time
	// (a frozen primary: the call may have committed; whatever made it
	// tries again, under the same ids).
	if errors.Is(err, journal.ErrUnreachable) || errors.Is(err, journal.ErrNoAnswer) {
		return &fairway.Error{Code: fairway.CodeUnavailable, Message: err.Error()}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	// No connection was made (the server down, or refusing this
	// database's connections): whatever PostgreSQL said, no statement ran.
	// (Taken for a statement it refused, a submission of a partition whose
	// database refused connections was refused as poison, and lost.)
	if errors.As(err, new(*pgconn.ConnectError)) {
		return &fairway.Error{Code: fairway.CodeUnavailable, Message: "PostgreSQL unreachable: " + err.Error()}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		// Class 53 (disk full, out of memory, too many connections) passes
		// too: the statement was fine, the server cannot take it now.
		case strings.HasPrefix(pgErr.Code, "08"), strings.HasPrefix(pgErr.Code, "53"), pgErr.Code == "57P01", pgErr.Code == "57P03":
			return &fairway.Error{Code: fairway.CodeUnavailable, Message: "PostgreSQL: " + pgErr.Message}
		}
		return fmt.Errorf("PostgreSQL: %s (%s)", pgErr.Message, pgErr.Code)
	}
	if pgconn.SafeToRetry(err) {
		return &fairway.Error{Code: fairway.CodeUnavailable, Message: "PostgreSQL unreachable: " + err.Error()}
	}
	// The connection broke during the statement (the server died, as in a
	// failover, or the network dropped it). Whether it committed is not
	// known, and every write of the store is made to be applied again
	// (jobs by id, outcomes by attempt, claims by their request's id), so
	// it is unavailable: tried again later, never taken for a statement
	// PostgreSQL refused. (Taken for one, a submission was refused as
	// poison during a failover, and lost.)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.As(err, new(*net.OpError)) {
		return &fairway.Error{Code: fairway.CodeUnavailable, Message: "PostgreSQL connection lost: " + err.Error()}
	}
	return err
}

//go:embed sql/job_columns.sql
var jobColumns string

func init() {
	jobColumns = strings.TrimSpace(stripComments(jobColumns))
	jobGraphSQL = strings.ReplaceAll(jobGraphSQL, "{{job_columns}}", jobColumns)
}

func stripComments(sql string) string {
	var b strings.Builder
	for line := range strings.Lines(sql) {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// scanJob reads a row selected with jobColumns.
func scanJob(row pgx.Row) (fairway.Job, error) {
	var j fairway.Job
	var args, result []byte
	var timeoutMS int64
	err := row.Scan(&j.ID, &j.Task, &j.Group, &args, &j.Subject, &j.Submitter, &j.Priority,
		&j.Tracker, &j.State, &j.Retries, &j.MaxRetries, &j.Attempt, &j.RunAt, &j.ExpiresAt,
		&j.DependsOn, &j.Progress, &j.Executor, &j.LeaseUntil, &j.Submitted, &j.Started,
		&j.Finished, &result, &j.Error, &j.TriggerAfter, &j.TraceParent, &timeoutMS)
	j.Args, j.Result = args, result
	if timeoutMS > 0 {
		j.Timeout = (time.Duration(timeoutMS) * time.Millisecond).String()
	}
	if j.State == fairway.StateRunning && j.Started != nil {
		j.EstimatedEnd = fairway.EstimateEnd(*j.Started, j.Progress, time.Now())
	}
	return j, err
}

func collectJobs(rows pgx.Rows) ([]fairway.Job, error) {
	defer rows.Close()
	var jobs []fairway.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

// interval renders a duration for a ::interval parameter.
func interval(d time.Duration) string {
	return fmt.Sprintf("%d microseconds", d.Microseconds())
}
