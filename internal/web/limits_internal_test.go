package web

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/httpedge"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/stretchr/testify/require"
)

// listening is a server listening on 127.0.0.1 with edge.
func listening(t *testing.T, edge httpedge.Limits) net.Addr {
	t.Helper()
	_, nc := natstest.Start(t)
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	srv, err := New(Config{Client: client, AdminToken: "a-token-of-enough-length-1234", ReadToken: "r-token-of-enough-length-1234", Edge: edge})
	require.NoError(t, err)
	addr, err := srv.Listen(t.Context(), "127.0.0.1:0")
	require.NoError(t, err)
	return addr
}

// TestConnectionLimit: beyond Config.Edge.Total connections, a new one
// waits until one closes: clients holding connections open cannot take the
// process's file descriptors, and the server is served again as soon as
// they let one go.
func TestConnectionLimit(t *testing.T) {
	addr := listening(t, httpedge.Limits{Total: 1})

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

// TestConnectionsPerAddress: Listen bounds each client address by
// Config.Edge.PerAddr: one address holding its bound gets a 503 at once,
// and another is served meanwhile; a connection that sends nothing is
// closed after the header grace.
func TestConnectionsPerAddress(t *testing.T) {
	addr := listening(t, httpedge.Limits{PerAddr: 2, HeaderGrace: 500 * time.Millisecond})
	from := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c, err := d.Dial("tcp", addr.String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		return c
	}
	held := []net.Conn{from("127.0.0.2"), from("127.0.0.2")}
	res, err := http.ReadResponse(bufio.NewReader(from("127.0.0.2")), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)

	c := &http.Client{Timeout: 5 * time.Second}
	ok, err := c.Get("http://" + addr.String() + "/healthz")
	require.NoError(t, err)
	require.NoError(t, ok.Body.Close())
	require.Equal(t, http.StatusOK, ok.StatusCode)

	start := time.Now()
	_, err = held[0].Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "a silent connection is closed")
	require.Less(t, time.Since(start), 5*time.Second, "after the grace, not the server's 10 s")
}
