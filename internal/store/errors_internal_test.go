package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestConnectionLostIsUnavailable: an error of a connection that broke
// during a statement (what pgx returns when the server dies mid-query,
// as in a failover) is unavailable, so that callers try again instead of
// taking the statement for one PostgreSQL refused; an error PostgreSQL
// gives for the statement itself is not.
func TestConnectionLostIsUnavailable(t *testing.T) {
	for name, err := range map[string]error{
		"unexpected EOF":   fmt.Errorf("inserting 6 jobs: %w", io.ErrUnexpectedEOF),
		"EOF":              io.EOF,
		"conn closed":      fmt.Errorf("x: %w", pgconn.ErrConnClosed),
		"connection reset": &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET},
		"admin shutdown":   &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"},
	} {
		require.ErrorIs(t, interpretError(err), fairway.ErrUnavailable, name)
	}
	for name, err := range map[string]error{
		"unique violation": &pgconn.PgError{Code: "23505", Message: "duplicate key value"},
		"bad value":        &pgconn.PgError{Code: "22P02", Message: "invalid input syntax"},
		"other":            errors.New("something else"),
	} {
		require.NotErrorIs(t, interpretError(err), fairway.ErrUnavailable, name)
	}
}

// TestRefusedConnectionIsUnavailable: a connection the server refuses
// with an error of its own (here its database takes no connections, as
// when it is taken down) is unavailable, not a statement refused.
func TestRefusedConnectionIsUnavailable(t *testing.T) {
	admin, err := pgx.Connect(t.Context(), pgtest.NewDB(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	url := pgtest.NewDB(t)
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	_, err = admin.Exec(t.Context(), fmt.Sprintf(`ALTER DATABASE %q ALLOW_CONNECTIONS false`, cfg.Database))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), fmt.Sprintf(`ALTER DATABASE %q ALLOW_CONNECTIONS true`, cfg.Database))
	})
	_, err = pgx.ConnectConfig(t.Context(), cfg)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "the server's own refusal")
	require.Equal(t, "55000", pgErr.Code)
	require.ErrorIs(t, interpretError(fmt.Errorf("storing 3 submissions: %w", err)), fairway.ErrUnavailable)
}
