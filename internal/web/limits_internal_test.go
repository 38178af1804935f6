package web

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/stretchr/testify/require"
)

// TestConnectionLimit: beyond maxConnections, a new connection waits until
// one closes: a client holding connections open (slowloris) cannot take
// the process's file descriptors, and the server is served again as soon
// as it lets one go.
func TestConnectionLimit(t *testing.T) {
	old := maxConnections
	maxConnections = 1
	t.Cleanup(func() { maxConnections = old })
	_, nc := natstest.Start(t)
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	srv, err := New(Config{Client: client, AdminToken: "a-token-of-enough-length-1234", ReadToken: "r-token-of-enough-length-1234"})
	require.NoError(t, err)
	addr, err := srv.Listen(t.Context(), "127.0.0.1:0")
	require.NoError(t, err)

	held, err := net.Dial("tcp", addr.String()) // sends nothing: holds the only connection
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() {
		c := &http.Client{Timeout: 20 * time.Second}
		res, err := c.Get("http://" + addr.String() + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		served <- err
	}()
	select {
	case err := <-served:
		t.Fatalf("a connection beyond the limit was served (err %v)", err)
	case <-time.After(300 * time.Millisecond): // nothing to await: it must not happen
	}
	require.NoError(t, held.Close())
	require.NoError(t, <-served, "served once the held connection closed")
}
