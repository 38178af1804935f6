package isolation_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsauth"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/fairwayhq/fairway/internal/web"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

const (
	webAdminToken = "isolation-admin-token-0123456789"
	webReadToken  = "isolation-read-token-0123456789"
	// finishedJobs is the history the attack's stats read: jobs that
	// ended over the last 31 days.
	finishedJobs = 300_000
	// operatorBound is the documented bound (docs/security.md, hostile web
	// clients) on an admin's or operator's request during a read-only
	// flood.
	operatorBound = time.Second
)

// webEnv is `fairway web` with the operator's credential in front of a
// coordinator, on a real nats-server in operator mode and a real
// PostgreSQL holding finishedJobs ended jobs.
type webEnv struct {
	*env
	web      string // the dashboard's base URL
	opClient *events.Client
}

func setupWeb(t *testing.T) *webEnv {
	t.Helper()
	dir := t.TempDir()
	k, err := natsauth.Open(filepath.Join(dir, "keys"), "fairway", true)
	require.NoError(t, err)
	_, err = k.ExecutorAccountJWT("w1")
	require.NoError(t, err)
	e := &env{t: t, dir: dir, keys: k}
	e.url = startNATS(t, k, dir)
	ctx := t.Context()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))

	st, dbURL := storetest.OpenURL(t)
	seedFinished(t, dbURL, finishedJobs)
	coord, err := coordinator.New(storetest.Public(st), e.connectAs(natsauth.KindCoordinator, "c"), coordinator.Config{Logger: logger.With("component", "coordinator")})
	require.NoError(t, err)
	require.NoError(t, coord.Start(ctx))
	t.Cleanup(coord.Stop)
	ex, err := executor.New(e.connectAs(natsauth.KindExecutor, "w1"), executor.Config{AppID: "w1", PoolSize: 1,
		WakeupPeriod: time.Hour, Heartbeat: time.Second, Logger: logger.With("component", "executor")})
	require.NoError(t, err)
	ex.Handle("echo", func(_ context.Context, job *executor.Job) error { return job.SetResult(job.Args) })
	require.NoError(t, ex.Start(ctx))
	t.Cleanup(ex.Stop)

	// fairway web --creds operator.creds: a connection of its own.
	srv, err := web.New(web.Config{Client: newClient(t, e.connectAs(natsauth.KindOperator, "web")),
		AdminToken: webAdminToken, ReadToken: webReadToken, Logger: logger.With("component", "web")})
	require.NoError(t, err)
	addr, err := srv.Listen(ctx, "127.0.0.1:0")
	require.NoError(t, err)
	return &webEnv{env: e, web: "http://" + addr.String(), opClient: newClient(t, e.connectAs(natsauth.KindOperator, "op"))}
}

// seedFinished stores n jobs of acme that ended over the last 31 days, as
// retention would keep them (failed ones are kept a month by default).
func seedFinished(t *testing.T, dbURL string, n int) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), `
		WITH s AS (SELECT i, now() - (i::float8 / $1 * interval '744 hours') AS fin FROM generate_series(1, $1) AS i)
		INSERT INTO fairway_job_row (id, task, group_name, priority, state, max_retries, attempt, run_at, submitted, started, finished)
		SELECT 'seed-' || i, 'task-' || (i % 20), 'acme', 'low', CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'success' END, 0, 1,
		       fin - interval '3 seconds', fin - interval '3 seconds', fin - interval '2 seconds', fin
		  FROM s`, n)
	require.NoError(t, err)
	// Into batches of records, as the journal's leader writes them.
	_, err = conn.Exec(t.Context(), `SELECT fairway_move_job_rows()`)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), "ANALYZE fairway_record")
	require.NoError(t, err)
}

// webGet sends a GET with a bearer token and returns its status, its
// Retry-After and its error's code and field, having read the body.
func webGet(ctx context.Context, url, token string) (status int, retryAfter string, e fairway.Error, err error) {
	return webGetWith(ctx, http.DefaultClient, url, token)
}

// webGetWith is webGet through client.
func webGetWith(ctx context.Context, client *http.Client, url, token string) (status int, retryAfter string, e fairway.Error, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, "", e, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		return 0, "", e, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK && err == nil {
		var body struct {
			Error fairway.Error `json:"error"`
		}
		err = json.Unmarshal(data, &body)
		e = body.Error
	}
	return res.StatusCode, res.Header.Get("Retry-After"), e, err
}

// fromAddr is an HTTP client whose connections come from the loopback
// address 127.0.0.<n> (Linux answers the whole 127/8): the web edge bounds
// each client address's connections, so an attacker with many streams
// comes from many addresses, and the admin from its own (127.0.0.1).
func fromAddr(n byte, jar http.CookieJar) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, n)}, Timeout: 5 * time.Second}
	return &http.Client{Jar: jar, Transport: &http.Transport{DialContext: dialer.DialContext}}
}

// stream opens GET /api/events with client (and token, unless ""); it
// returns the status once the stream is open (its first line read) or
// refused, the refusal's field, and its Retry-After. The stream stays open
// until ctx ends.
func stream(ctx context.Context, t *testing.T, client *http.Client, url, token string) (int, string, string) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/api/events", nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := client.Do(req)
	require.NoError(t, err)
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		var body struct {
			Error fairway.Error `json:"error"`
		}
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, body.Error.Field, res.Header.Get("Retry-After")
	}
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, ": live events\n", line)
	go func() { <-ctx.Done(); res.Body.Close() }()
	return res.StatusCode, "", ""
}

// median of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestReadOnlyWebFloodDelaysNoOperator (issue 23, the web edge): a
// read-only dashboard user holds every live stream it can and floods
// /api/stats over 31 days of history, each call with a fresh bucket or
// group (a stats call reads every job that ended in its window: with
// finishedJobs of them, a fraction of a second each). Meanwhile an admin's
// GET /api/jobs through the same dashboard, its live stream, and an
// operator's `executors` over NATS each answer within operatorBound.
// Before, the read-only user's requests, each computed afresh, queued in
// the one lane of the operator API that the admin and the operator share
// (one at a time): the admin's requests waited behind them for seconds, or
// were refused, and the read-only user held all 64 live streams.
func TestReadOnlyWebFloodDelaysNoOperator(t *testing.T) {
	e := setupWeb(t)
	ctx := t.Context()

	// Idle figures, and the cost of one stats call.
	jobsURL := e.web + "/api/jobs?limit=50"
	measure := func(n int) (jobs, executors []time.Duration) {
		for range n {
			start := time.Now()
			status, _, apiErr, err := webGet(ctx, jobsURL, webAdminToken)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, status, "admin GET /api/jobs: %+v", apiErr)
			jobs = append(jobs, time.Since(start))
			start = time.Now()
			list, err := e.opClient.Executors(ctx)
			require.NoError(t, err, "operator executors")
			require.NotEmpty(t, list)
			executors = append(executors, time.Since(start))
		}
		return jobs, executors
	}
	idleJobs, idleExecutors := measure(5)
	start := time.Now()
	status, _, apiErr, err := webGet(ctx, e.web+"/api/stats?window=744h", webAdminToken)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "%+v", apiErr)
	statsCost := time.Since(start)
	t.Logf("idle: admin GET /api/jobs p50 %s, operator executors p50 %s; one stats call over 744h of %d jobs: %s",
		median(idleJobs), median(idleExecutors), finishedJobs, statsCost)

	// The read-only user takes every live stream it can: as a bearer
	// token, then through as many sessions as it likes.
	attack, stopAttack := context.WithCancel(ctx)
	defer stopAttack()
	held, refusedField := 0, ""
	addr := byte(2) // the attacker's next address, 127.0.0.<addr>
	client, token, heldHere := fromAddr(addr, nil), webReadToken, 0
	for {
		status, field, retry := stream(attack, t, client, e.web, token)
		switch {
		case status == http.StatusOK:
			held, heldHere = held+1, heldHere+1
			continue
		case status == http.StatusTooManyRequests && field == "token":
			secs, _ := strconv.Atoi(retry)
			time.Sleep(time.Duration(secs) * time.Second) // over its rate: the Retry-After it was given
			continue
		case status == http.StatusTooManyRequests && field == "streams" && heldHere > 0:
			// This session's (or bearer token's) budget: log in again.
			jar, _ := cookiejar.New(nil)
			addr++
			client, token, heldHere = fromAddr(addr, jar), "", 0
			res, err := client.Post(e.web+"/api/login", "application/json", strings.NewReader(`{"token":"`+webReadToken+`"}`))
			require.NoError(t, err)
			res.Body.Close()
			continue
		}
		refusedField = field
		t.Logf("read-only streams: %d held, then %d (%q)", held, status, field)
		break
	}

	// The flood: fresh buckets (refused now: a bucket of the documented
	// list only), the buckets allowed (each computed once, then cached),
	// and fresh groups (each a new computation, of no job).
	const flooders = 16
	var sent, answered, computed atomic.Int64
	var mu sync.Mutex
	statuses := map[string]int{}
	allSent := make(chan struct{})
	var wg sync.WaitGroup
	for f := range flooders {
		flooder := fromAddr(byte(100+f), nil) //nolint:gosec // G115: f < flooders (16)
		wg.Go(func() {
			allowed := []string{"", "&bucket=1h", "&bucket=2h", "&bucket=3h", "&bucket=6h", "&bucket=12h", "&bucket=24h"}
			for i := 0; attack.Err() == nil; i++ {
				var q string
				expensive := false
				switch i % 3 {
				case 0: // a fresh bucket: once a fresh computation over 31 days
					q = fmt.Sprintf("window=744h&bucket=%ds", 1860+f*100000+i)
				case 1: // the buckets allowed, over all groups or acme's (all its jobs)
					q, expensive = "window=744h"+allowed[(f+i)%len(allowed)]+[]string{"", "&group=acme"}[(i/3)%2], true
				case 2: // a fresh group
					q = fmt.Sprintf("window=744h&group=g%d_%d", f, i)
				}
				if sent.Add(1) == flooders {
					close(allSent)
				}
				status, retry, apiErr, err := webGetWith(attack, flooder, e.web+"/api/stats?"+q, webReadToken)
				if err != nil {
					return // the attack is over
				}
				answered.Add(1)
				if status == http.StatusOK && expensive {
					computed.Add(1)
				}
				mu.Lock()
				statuses[fmt.Sprintf("%d %s/%s retry-after=%s", status, apiErr.Code, apiErr.Field, retry)]++
				mu.Unlock()
			}
		})
	}
	<-allSent // every flooder has a request in flight

	// The admin and the operator, during the flood: until two of the
	// flood's stats over all of the history have been answered (seconds
	// each), so that the measures overlap their computation.
	status, _, _ = stream(attack, t, &http.Client{}, e.web, webAdminToken)
	require.Equal(t, http.StatusOK, status, "the admin opens a live stream while the read-only user holds every one it can")
	var floodJobs, floodExecutors []time.Duration
	deadline := time.Now().Add(time.Minute)
	for len(floodJobs) < 5 || computed.Load() < 2 {
		require.True(t, time.Now().Before(deadline), "the flood's stats were not computed within a minute")
		j, x := measure(1)
		floodJobs, floodExecutors = append(floodJobs, j...), append(floodExecutors, x...)
	}
	stopAttack()
	wg.Wait()
	t.Logf("during the flood (%d measures): admin GET /api/jobs p50 %s max %s (idle %s), operator executors p50 %s max %s (idle %s)",
		len(floodJobs), median(floodJobs), slices.Max(floodJobs), median(idleJobs), median(floodExecutors), slices.Max(floodExecutors), median(idleExecutors))
	t.Logf("the flood: %d requests answered: %v", answered.Load(), statuses)
	require.Less(t, slices.Max(floodJobs), operatorBound, "an admin's GET /api/jobs during the read-only flood")
	require.Less(t, slices.Max(floodExecutors), operatorBound, "an operator's executors during the read-only flood")
	require.Equal(t, "streams", refusedField, "the read-only user was refused streams beyond its budget")
	refusedQuota := 0
	for k, n := range statuses {
		if strings.HasPrefix(k, "429 quota/") && !strings.HasSuffix(k, "retry-after=") {
			refusedQuota += n
		}
	}
	require.Positive(t, refusedQuota, "the read-only flood is answered 429 with Retry-After: %v", statuses)
}
