package store

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/fairwayhq/fairway"
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
