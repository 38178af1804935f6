package isolation_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/internal/natsauth"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/fairwayhq/fairway/internal/web"
	"github.com/stretchr/testify/require"
)

const (
	// slowConns is how many connections the slow client opens, all from
	// slowClientAddr: more than the dashboard's total bound (512).
	slowConns = 600
	// slowInterval is how often each of them sends a byte of its headers.
	slowInterval = 2 * time.Second
	// slowClientAddr and adminAddr are two client addresses on the
	// loopback (Linux answers all of 127.0.0.0/8).
	slowClientAddr = "127.0.0.2"
	adminAddr      = "127.0.0.1"
)

// setupSlowloris is `fairway web` with the operator's credential in front
// of a coordinator, on a real nats-server in operator mode and a real (and
// empty) PostgreSQL; it returns the dashboard's base URL.
func setupSlowloris(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	k, err := natsauth.Open(filepath.Join(dir, "keys"), "fairway", true)
	require.NoError(t, err)
	e := &env{t: t, dir: dir, keys: k}
	e.url = startNATS(t, k, dir)
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	coord, err := coordinator.New(storetest.Public(storetest.Open(t)), e.connectAs(natsauth.KindCoordinator, "c"),
		coordinator.Config{Logger: logger.With("component", "coordinator")})
	require.NoError(t, err)
	require.NoError(t, coord.Start(t.Context()))
	t.Cleanup(coord.Stop)
	srv, err := web.New(web.Config{Client: newClient(t, e.connectAs(natsauth.KindOperator, "web")),
		AdminToken: webAdminToken, ReadToken: webReadToken, Logger: logger.With("component", "web")})
	require.NoError(t, err)
	addr, err := srv.Listen(t.Context(), adminAddr+":0")
	require.NoError(t, err)
	return "http://" + addr.String()
}

// TestSlowlorisDelaysNoAdmin (issue 30, the web edge): one client address
// opens slowConns connections to the dashboard, each sending a byte of its
// request's headers every slowInterval, and opens a new one whenever one
// is closed. Meanwhile an admin's GET /api/jobs from another address, each
// on a new connection, is answered within operatorBound. Before, the
// dashboard held 512 connections in all, whoever opened them, and gave
// headers 10 s however slowly they came: the slow client held all 512 for
// 10 s at a time, and the admin's connection waited behind its others.
func TestSlowlorisDelaysNoAdmin(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("dials from 127.0.0.2: Linux only (other systems answer 127.0.0.1 alone unless configured)")
	}
	base := setupSlowloris(t)
	ctx := t.Context()

	adminClient := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(adminAddr)}}).DialContext}}
	var failures []string // the admin's requests not answered 200
	admin := func() time.Duration {
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, "GET", base+"/api/jobs?limit=50", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+webAdminToken)
		res, err := adminClient.Do(req)
		if err != nil { // the figures are logged before the test fails
			failures = append(failures, fmt.Sprintf("after %s: %v", time.Since(start), err))
			return time.Since(start)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			failures = append(failures, fmt.Sprintf("after %s: %s", time.Since(start), res.Status))
		}
		return time.Since(start)
	}
	var idle []time.Duration
	for range 5 {
		idle = append(idle, admin())
	}
	require.Empty(t, failures, "admin GET /api/jobs, idle")

	// The slow client: each of its connections sends a byte of headers
	// that never end every slowInterval, from slowClientAddr; one the
	// server cuts is opened again at once, one it refuses at the next
	// byte's time.
	attack, stopAttack := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stopAttack(); wg.Wait() })
	var dials, dialErrs, closed atomic.Int64
	opened := make(chan struct{}, slowConns)
	header := "GET /api/jobs HTTP/1.1\r\nHost: fairway\r\n" + strings.Repeat("X-Slow: a\r\n", 1000)
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(slowClientAddr)}, Timeout: 5 * time.Second}
	addr := strings.TrimPrefix(base, "http://")
	for range slowConns {
		wg.Go(func() {
			tick := time.NewTicker(slowInterval)
			defer tick.Stop()
			first := true
			for attack.Err() == nil {
				dials.Add(1)
				sent := 0
				c, err := dialer.DialContext(attack, "tcp", addr)
				if err == nil {
					gone := make(chan struct{}) // the server closed c (it reads what the server says)
					go func() { _, _ = io.Copy(io.Discard, c); close(gone) }()
				trickle:
					for ; ; sent++ {
						if _, err = c.Write([]byte{header[sent%len(header)]}); err != nil {
							break
						}
						if first {
							first = false
							opened <- struct{}{}
						}
						select {
						case <-attack.Done():
							break trickle
						case <-gone:
							break trickle
						case <-tick.C:
						}
					}
					_ = c.Close()
					<-gone
					if attack.Err() == nil {
						closed.Add(1)
					}
				} else if attack.Err() == nil {
					dialErrs.Add(1)
				}
				if first {
					first = false
					opened <- struct{}{}
				}
				if sent > 1 {
					continue // held, then cut: open another at once
				}
				select { // refused, or never opened: at the next byte's time
				case <-attack.Done():
				case <-tick.C:
				}
			}
		})
	}
	// The attack is on once every connection was opened and sent its
	// first byte (or failed to).
	for range slowConns {
		select {
		case <-opened:
		case <-time.After(time.Minute):
			t.Fatal("the slow client's connections did not open")
		}
	}

	// Ten admin requests, one every 500 ms: over the slow client's
	// connections' grace, their cut and their reopening.
	var during []time.Duration
	pace := time.NewTicker(500 * time.Millisecond)
	defer pace.Stop()
	for range 10 {
		during = append(during, admin())
		<-pace.C
	}
	stopAttack()
	wg.Wait()

	p50, most := median(idle), slices.Max(idle)
	t.Logf("idle: admin p50=%s max=%s", p50, most)
	t.Logf("slowloris: admin p50=%s max=%s (%d connections of %s, a byte each every %s; %d dials, %d closed by the server, %d dials failed)",
		median(during), slices.Max(during), slowConns, slowClientAddr, slowInterval, dials.Load(), closed.Load(), dialErrs.Load())
	var slow []string
	for i, d := range during {
		if d > operatorBound {
			slow = append(slow, fmt.Sprintf("#%d %s", i+1, d))
		}
	}
	require.Empty(t, failures, "admin GET /api/jobs during the attack")
	require.Empty(t, slow, "admin requests over %s during the attack", operatorBound)
}
