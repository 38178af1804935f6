package httpedge_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/httpedge"
	"github.com/stretchr/testify/require"
)

// edge is a server bounded by httpedge, on 127.0.0.1.
type edge struct {
	addr   string
	closed chan struct{} // a token per connection the server closed
}

// serve serves h bounded by l, with the timeouts of the dashboard's
// server (10 s for headers, 30 s for a request).
func serve(t *testing.T, l httpedge.Limits, h http.Handler) *edge {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &edge{addr: ln.Addr().String(), closed: make(chan struct{}, 1000)}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				e.closed <- struct{}{}
			}
		}}
	bounded := httpedge.Wrap(srv, ln, l)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(bounded) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return e
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })

// dialFrom opens a connection to addr from the loopback address from
// (127.0.0.2 is another client than 127.0.0.1 on Linux, which answers all
// of 127.0.0.0/8; other systems have 127.0.0.1 alone unless configured).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	if from != "127.0.0.1" && runtime.GOOS != "linux" {
		t.Skipf("dials from %s: Linux only", from)
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// get sends GET / on c and reads the answer.
func get(t *testing.T, c net.Conn) *http.Response {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: edge\r\n\r\n")
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	return res
}

// TestPerAddressBound: an address holding PerAddr connections (sending
// nothing) gets its next one answered 503 at once, not queued; another
// address is served meanwhile; and the address is served again once one of
// its connections closes.
func TestPerAddressBound(t *testing.T) {
	e := serve(t, httpedge.Limits{PerAddr: 32, Total: 512, HeaderGrace: time.Minute}, okHandler)
	held := make([]net.Conn, 32)
	for i := range held {
		held[i] = dialFrom(t, "127.0.0.2", e.addr)
	}
	start := time.Now()
	refused := dialFrom(t, "127.0.0.2", e.addr)
	require.NoError(t, refused.SetDeadline(time.Now().Add(10*time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(refused), nil) // answered before it asks
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "the 33rd connection of 127.0.0.2")
	require.True(t, res.Close, "Connection: close")
	require.Less(t, time.Since(start), 2*time.Second, "refused at once")
	// A client that sent its request first gets the answer too.
	res = get(t, dialFrom(t, "127.0.0.2", e.addr))
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "the 34th connection of 127.0.0.2")

	res = get(t, dialFrom(t, "127.0.0.1", e.addr))
	require.Equal(t, http.StatusOK, res.StatusCode, "another address")

	require.NoError(t, held[0].Close())
	select { // the server's own close of held[0] (the 127.0.0.1 one is still open)
	case <-e.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not close a connection its client closed")
	}
	res = get(t, dialFrom(t, "127.0.0.2", e.addr))
	require.Equal(t, http.StatusOK, res.StatusCode, "127.0.0.2 again, once one of its connections closed")
}

// TestTotalBoundWaits: beyond Total, a new connection waits until one
// closes, from whichever address (it is not refused).
func TestTotalBoundWaits(t *testing.T) {
	e := serve(t, httpedge.Limits{PerAddr: 2, Total: 2, HeaderGrace: time.Minute}, okHandler)
	a := dialFrom(t, "127.0.0.2", e.addr)
	_ = dialFrom(t, "127.0.0.3", e.addr)
	third := dialFrom(t, "127.0.0.1", e.addr)
	answered := make(chan *http.Response, 1)
	go func() {
		_ = third.SetDeadline(time.Now().Add(20 * time.Second))
		_, _ = io.WriteString(third, "GET / HTTP/1.1\r\nHost: edge\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(third), nil)
		if err != nil {
			res = nil
		}
		answered <- res
	}()
	select {
	case res := <-answered:
		t.Fatalf("a connection beyond the total was served: %v", res)
	case <-time.After(300 * time.Millisecond): // nothing to await: it must not happen
	}
	require.NoError(t, a.Close())
	res := <-answered
	require.NotNil(t, res)
	require.Equal(t, http.StatusOK, res.StatusCode)
}

func TestClientKey(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.7:80":                   "192.0.2.7/32",
		"[::ffff:192.0.2.7]:80":          "192.0.2.7/32",
		"[2001:db8:1:2:3:4:5:6]:443":     "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443":     "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":              "fe80::/64",
		"[2001:db8:1:3:3:4:5:6]:1234":    "2001:db8:1:3::/64",
		"[::1]:8080":                     "::/64",
		"127.0.0.2:1":                    "127.0.0.2/32",
		"[2001:db8:ffff:ffff:1::2]:9999": "2001:db8:ffff:ffff::/64",
	} {
		ap := netip.MustParseAddrPort(addr)
		require.Equal(t, want, httpedge.ClientKey(net.TCPAddrFromAddrPort(ap)).String(), addr)
	}
	require.Equal(t, netip.Prefix{}, httpedge.ClientKey(&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}))
}

// trickle sends s on c a byte every interval until c fails; it returns
// how long the server took to close c, and how many bytes it sent.
func trickle(t *testing.T, c net.Conn, s string, interval time.Duration) (time.Duration, int) {
	t.Helper()
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		_, _ = io.Copy(io.Discard, c) // returns when the server closes c
		closed <- time.Since(start)
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; ; i++ {
		if i < len(s) {
			if _, err := c.Write([]byte{s[i]}); err != nil {
				return <-closed, i
			}
		}
		select {
		case d := <-closed:
			return d, i + 1
		case <-tick.C:
		case <-time.After(20 * time.Second):
			t.Fatal("the server never closed a trickling connection")
		}
	}
}

// TestTricklingHeadersAreCut: headers a byte every 100 ms (10 bytes/s,
// under a MinRate of 100) are cut soon after the grace, not at the
// server's ReadHeaderTimeout (10 s); and a connection that sends nothing
// at HeaderGrace.
func TestTricklingHeadersAreCut(t *testing.T) {
	e := serve(t, httpedge.Limits{HeaderGrace: 300 * time.Millisecond, MinRate: 100}, okHandler)
	took, sent := trickle(t, dialFrom(t, "127.0.0.1", e.addr), "GET / HTTP/1.1\r\nHost: edge\r\nX-Slow: "+strings.Repeat("a", 1000), 100*time.Millisecond)
	t.Logf("trickling headers: cut after %s, %d bytes", took, sent)
	require.GreaterOrEqual(t, took, 300*time.Millisecond)
	require.Less(t, took, 3*time.Second)

	silent := dialFrom(t, "127.0.0.1", e.addr)
	start := time.Now()
	_ = silent.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := silent.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	require.Less(t, time.Since(start), 3*time.Second, "a silent connection is closed after the grace")
}

// TestIdleThenTricklingIsCut: after an answered request, the next
// request's headers on the same connection are timed afresh.
func TestIdleThenTricklingIsCut(t *testing.T) {
	e := serve(t, httpedge.Limits{HeaderGrace: 300 * time.Millisecond, MinRate: 100}, okHandler)
	c := dialFrom(t, "127.0.0.1", e.addr)
	require.Equal(t, http.StatusOK, get(t, c).StatusCode)
	require.NoError(t, c.SetDeadline(time.Time{}))
	took, _ := trickle(t, c, "GET / HTTP/1.1\r\nHost: edge\r\nX-Slow: "+strings.Repeat("a", 1000), 100*time.Millisecond)
	require.Less(t, took, 3*time.Second)
}

// sendPaced writes s on c in chunks of n bytes every interval.
func sendPaced(c net.Conn, s string, n int, interval time.Duration) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for len(s) > 0 {
		k := min(n, len(s))
		if _, err := io.WriteString(c, s[:k]); err != nil {
			return err
		}
		s = s[k:]
		<-tick.C
	}
	return nil
}

// TestProgressingRequestPasses: headers and then a body sent slowly but
// above MinRate (200 bytes/s against 100), for longer than both graces
// together, are read whole and answered.
func TestProgressingRequestPasses(t *testing.T) {
	got := make(chan string, 1)
	e := serve(t, httpedge.Limits{HeaderGrace: 300 * time.Millisecond, BodyGrace: 300 * time.Millisecond, MinRate: 100},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				got <- "error: " + err.Error()
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			got <- string(b)
			_, _ = fmt.Fprintf(w, "%d\n", len(b))
		}))
	c := dialFrom(t, "127.0.0.1", e.addr)
	payload := strings.Repeat("0123456789", 30) // 300 bytes: 1.5 s at 200 bytes/s
	head := fmt.Sprintf("POST /upload HTTP/1.1\r\nHost: edge\r\nContent-Type: text/plain\r\nX-Padding: %s\r\nContent-Length: %d\r\n\r\n",
		strings.Repeat("p", 100), len(payload))
	start := time.Now()
	require.NoError(t, sendPaced(c, head+payload, 10, 50*time.Millisecond))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, payload, <-got)
	t.Logf("progressing request: %d bytes in %s", len(head)+len(payload), time.Since(start))
	require.Greater(t, time.Since(start), time.Second, "longer than the graces")
}

// TestStalledBodyIsCut: a body that stops after a few bytes fails the
// handler's read soon after the grace, not at the server's ReadTimeout.
func TestStalledBodyIsCut(t *testing.T) {
	readErr := make(chan error, 1)
	e := serve(t, httpedge.Limits{BodyGrace: 300 * time.Millisecond, MinRate: 100},
		http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			readErr <- err
		}))
	c := dialFrom(t, "127.0.0.1", e.addr)
	start := time.Now()
	_, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: edge\r\nContent-Length: 1000\r\n\r\n0123456789")
	require.NoError(t, err)
	select {
	case err := <-readErr:
		var ne net.Error
		require.True(t, errors.As(err, &ne) && ne.Timeout(), "a timeout: %v", err)
		require.Less(t, time.Since(start), 3*time.Second)
	case <-time.After(20 * time.Second):
		t.Fatal("a stalled body was not cut")
	}
}

// TestStreamingOutlivesTheBounds: a response that streams for longer than
// every grace (Server-Sent Events), after a request whose body was read,
// keeps its connection and its request's context: the server's read of the
// connection meanwhile is not timed.
func TestStreamingOutlivesTheBounds(t *testing.T) {
	const events = 15
	ended := make(chan error, 1)
	e := serve(t, httpedge.Limits{HeaderGrace: 100 * time.Millisecond, BodyGrace: 100 * time.Millisecond, MinRate: 1000},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for i := range events {
				select {
				case <-r.Context().Done():
					ended <- fmt.Errorf("the request's context ended after %d events: %w", i, context.Cause(r.Context()))
					return
				case <-tick.C:
				}
				_, _ = fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
			}
			ended <- nil
		}))
	for _, req := range []string{
		"GET /events HTTP/1.1\r\nHost: edge\r\n\r\n",
		"POST /events HTTP/1.1\r\nHost: edge\r\nContent-Length: 5\r\n\r\nhello",
	} {
		c := dialFrom(t, "127.0.0.1", e.addr)
		require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
		start := time.Now()
		_, err := io.WriteString(c, req)
		require.NoError(t, err)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.NoError(t, <-ended)
		require.Equal(t, events, strings.Count(string(body), "data: "))
		require.Greater(t, time.Since(start), 500*time.Millisecond)
	}
}
