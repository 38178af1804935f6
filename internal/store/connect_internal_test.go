package store

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConnectingToADatabaseThatNeverAnswersFails: a server that takes the
// TCP connection and never answers (a primary hung, or cut off after the
// handshake) fails Open within the connect timeout rather than holding
// it for ever, as pgx does with no connect_timeout; the URL's own
// connect_timeout stays the caller's.
func TestConnectingToADatabaseThatNeverAnswersFails(t *testing.T) {
	cfg, err := poolConfig("postgres://u@127.0.0.1:1/db", Options{})
	require.NoError(t, err)
	require.Equal(t, connectTimeout, cfg.ConnConfig.ConnectTimeout)
	require.NotNil(t, cfg.ConnConfig.DialFunc, "the dialer with keep-alives")
	cfg, err = poolConfig("postgres://u@127.0.0.1:1/db?connect_timeout=3", Options{})
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, cfg.ConnConfig.ConnectTimeout)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() }) // held open, never answered
		}
	}()
	old := connectTimeout
	connectTimeout = 500 * time.Millisecond
	t.Cleanup(func() { connectTimeout = old })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	began := time.Now()
	_, err = Open(ctx, "postgres://u:secret@"+ln.Addr().String()+"/db?sslmode=disable", Options{})
	require.Error(t, err)
	require.Less(t, time.Since(began), 10*time.Second, "failed at the connect timeout, not the caller's deadline: %v", err)
	require.NotContains(t, err.Error(), "secret")
	t.Log(err)
}
