package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

const (
	edgeAdmin = "edge-admin-token-0123456789"
	edgeRead  = "edge-read-token-0123456789"
)

// fakeOperatorAPI answers the operator API in place of the coordinators,
// and records what it was asked: each request's verb, lane and body. Its
// stats wait while held.
type fakeOperatorAPI struct {
	mu       sync.Mutex
	asked    []askedOf
	hold     chan struct{} // stats wait until it is closed; nil: never
	arrivals chan askedOf
}

type askedOf struct {
	verb, lane string
	stats      events.StatsRequest
}

func (f *fakeOperatorAPI) count(verb string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, a := range f.asked {
		if a.verb == verb {
			n++
		}
	}
	return n
}

// edgeServer is a web server in front of a fake operator API, on an
// embedded NATS with the event streams.
func edgeServer(t *testing.T, cfg Config) (*httptest.Server, *fakeOperatorAPI) {
	t.Helper()
	_, nc := natstest.Start(t)
	subjects := events.NewSubjects("")
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, events.EnsureStreams(t.Context(), js, subjects, events.StreamOptions{}))
	f := &fakeOperatorAPI{arrivals: make(chan askedOf, 100)}
	_, err = nc.Subscribe(subjects.AdminAll(), func(msg *nats.Msg) {
		go func() {
			a := askedOf{verb: strings.TrimPrefix(msg.Subject, "fairway.admin."), lane: events.Lane(msg)}
			var reply events.Reply
			switch a.verb {
			case events.VerbStats:
				_ = json.Unmarshal(msg.Data, &a.stats)
				reply.Stats = &fairway.Stats{BucketSeconds: 60}
			case events.VerbList:
				reply.Jobs = []fairway.Job{}
			}
			f.mu.Lock()
			f.asked = append(f.asked, a)
			hold := f.hold
			f.mu.Unlock()
			f.arrivals <- a
			if a.verb == events.VerbStats && hold != nil {
				<-hold
			}
			data, _ := json.Marshal(reply)
			_ = msg.Respond(data)
		}()
	})
	require.NoError(t, err)
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	cfg.Client, cfg.AdminToken, cfg.ReadToken = client, edgeAdmin, edgeRead
	srv, err := New(cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs, f
}

type edgeAnswer struct {
	status     int
	retryAfter string
	err        fairway.Error
}

// edgeGet sends a GET with a bearer token.
func edgeGet(t *testing.T, hs *httptest.Server, path, token string) edgeAnswer {
	t.Helper()
	a, err := edgeDo(hs, path, token)
	require.NoError(t, err)
	return a
}

// edgeDo is edgeGet for another goroutine than the test's (its context
// outlives the test's, for the cleanups that release it).
func edgeDo(hs *httptest.Server, path, token string) (edgeAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", hs.URL+path, nil)
	if err != nil {
		return edgeAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return edgeAnswer{}, err
	}
	defer res.Body.Close()
	a := edgeAnswer{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
	var body struct {
		Error fairway.Error `json:"error"`
	}
	if res.StatusCode != http.StatusOK {
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			return a, err
		}
		a.err = body.Error
	}
	return a, nil
}

// TestReadOnlyBoundedBeforeNATS (issue 23): the read-only role has at most
// ReadConcurrency requests to the coordinators running at once; one more is
// answered 429 at once, with Retry-After and the limit, and never reaches
// NATS. Admins are not bounded by it, and each role's requests name its
// lane of the operator API.
func TestReadOnlyBoundedBeforeNATS(t *testing.T) {
	t.Parallel()
	hs, f := edgeServer(t, Config{ReadConcurrency: 2, ReadRate: 1000, ReadBurst: 1000})
	f.hold = make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { close(f.hold) })
	for _, g := range []string{"a", "b"} { // two queries: one computation each
		wg.Go(func() {
			if a, err := edgeDo(hs, "/api/stats?group="+g, edgeRead); err != nil || a.status != http.StatusOK {
				t.Errorf("held stats: %+v %v", a, err)
			}
		})
	}
	for range 2 {
		a := <-f.arrivals
		require.Equal(t, events.LaneWebReadOnly, a.lane)
	}
	a := edgeGet(t, hs, "/api/jobs", edgeRead)
	require.Equal(t, http.StatusTooManyRequests, a.status, "%+v", a)
	require.Equal(t, "1", a.retryAfter)
	require.Equal(t, fairway.CodeQuota, a.err.Code)
	require.Equal(t, "role", a.err.Field)
	require.Contains(t, a.err.Message, "2 requests running")
	require.Zero(t, f.count(events.VerbList), "refused before NATS")

	a = edgeGet(t, hs, "/api/jobs", edgeAdmin)
	require.Equal(t, http.StatusOK, a.status, "%+v", a)
	require.Equal(t, events.LaneWebAdmin, (<-f.arrivals).lane)
}

// TestReadOnlyTokenRateLimited (issue 23): the read-only token may send
// ReadRate requests a second in bursts of ReadBurst, whichever session
// sends them; one more is answered 429 with the rate and Retry-After. The
// admin token is not limited.
func TestReadOnlyTokenRateLimited(t *testing.T) {
	t.Parallel()
	hs, _ := edgeServer(t, Config{ReadRate: 0.1, ReadBurst: 2}) // a token every 10 s
	for range 2 {
		require.Equal(t, http.StatusOK, edgeGet(t, hs, "/api/jobs", edgeRead).status)
	}
	a := edgeGet(t, hs, "/api/jobs", edgeRead)
	require.Equal(t, http.StatusTooManyRequests, a.status, "%+v", a)
	require.Equal(t, "token", a.err.Field)
	require.Contains(t, a.err.Message, "0.1 requests/s")
	retry, err := strconv.Atoi(a.retryAfter)
	require.NoError(t, err)
	require.GreaterOrEqual(t, retry, 9, "a token is 10 s away")
	// A session logged in with the token shares its budget.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	res, err := browser.Post(hs.URL+"/api/login", "application/json", strings.NewReader(`{"token":"`+edgeRead+`"}`))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	res, err = browser.Get(hs.URL + "/api/jobs")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	for range 5 {
		require.Equal(t, http.StatusOK, edgeGet(t, hs, "/api/jobs", edgeAdmin).status)
	}
}

// TestStatsParametersNormalisedAndComputedOnce (issue 23): /api/stats takes
// a window and a bucket of the documented lists only (400 naming the field
// and what is allowed otherwise); equivalent spellings share one cached
// answer; a query asked many times at once is computed once.
func TestStatsParametersNormalisedAndComputedOnce(t *testing.T) {
	t.Parallel()
	hs, f := edgeServer(t, Config{})
	for _, c := range []struct{ query, field, says string }{
		{"window=745h", "window", "744h"},
		{"window=90m", "window", "5m, 15m, 30m, 1h"},
		{"window=soon", "window", "positive duration"},
		{"window=1h&bucket=7s", "bucket", "1m0s (the default"},
		{"window=744h&bucket=1s", "bucket", "at most 1440"},
		{"window=1h&bucket=2h", "bucket", "longer than the window"},
	} {
		a := edgeGet(t, hs, "/api/stats?"+c.query, edgeAdmin)
		require.Equal(t, http.StatusBadRequest, a.status, c.query)
		require.Equal(t, c.field, a.err.Field, c.query)
		require.Contains(t, a.err.Message, c.says, c.query)
	}
	require.Zero(t, f.count(events.VerbStats), "refused before NATS")

	for _, q := range []string{"window=1h", "window=60m&bucket=60s", "window=3600s&bucket=1m", "bucket=1m"} {
		require.Equal(t, http.StatusOK, edgeGet(t, hs, "/api/stats?"+q, edgeAdmin).status, q)
	}
	require.Equal(t, 1, f.count(events.VerbStats), "four spellings of one query: one computation, then the cache")
	a := <-f.arrivals
	require.Equal(t, events.StatsRequest{Window: "1h0m0s", Bucket: "1m0s"}, a.stats)

	// Many at once, none cached: one computation.
	f.mu.Lock()
	f.hold = make(chan struct{})
	f.mu.Unlock()
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if a, err := edgeDo(hs, "/api/stats?window=24h&bucket=1h", edgeAdmin); err != nil || a.status != http.StatusOK {
				t.Errorf("%+v %v", a, err)
			}
		})
	}
	<-f.arrivals
	close(f.hold)
	wg.Wait()
	require.Equal(t, 2, f.count(events.VerbStats), "ten at once: one computation")
}

// openStream opens GET /api/events with client, and returns once the
// stream is open (its first line read), or the refusal.
func openStream(t *testing.T, client *http.Client, url, token string) (status int, retryAfter string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/api/events", nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := client.Do(req)
	require.NoError(t, err)
	stop = func() { cancel(); res.Body.Close() }
	if res.StatusCode == http.StatusOK {
		line, err := bufio.NewReader(res.Body).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, ": live events\n", line)
	}
	t.Cleanup(stop)
	return res.StatusCode, res.Header.Get("Retry-After"), stop
}

// TestLiveStreamsBoundedPerRoleAndClient (issue 23): each role has its own
// budget of live streams, and each session or bearer token a smaller one:
// the read-only role holding all of its own leaves the admins theirs.
func TestLiveStreamsBoundedPerRoleAndClient(t *testing.T) {
	t.Parallel()
	hs, _ := edgeServer(t, Config{StreamsMax: 3, StreamsPerClient: 2})
	plain := &http.Client{}
	var stops []func()
	for range 2 {
		status, _, stop := openStream(t, plain, hs.URL, edgeRead)
		require.Equal(t, http.StatusOK, status)
		stops = append(stops, stop)
	}
	status, retry, _ := openStream(t, plain, hs.URL, edgeRead)
	require.Equal(t, http.StatusTooManyRequests, status, "the read-only token's third stream: its client budget")
	require.Equal(t, "5", retry)

	session := func(token string) *http.Client {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		res, err := c.Post(hs.URL+"/api/login", "application/json", strings.NewReader(fmt.Sprintf(`{"token":%q}`, token)))
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		return c
	}
	s1, s2 := session(edgeRead), session(edgeRead)
	status, _, _ = openStream(t, s1, hs.URL, "")
	require.Equal(t, http.StatusOK, status, "a session of its own: the role's third")
	status, _, _ = openStream(t, s2, hs.URL, "")
	require.Equal(t, http.StatusTooManyRequests, status, "the read-only role holds its budget")

	for range 2 {
		status, _, _ = openStream(t, plain, hs.URL, edgeAdmin)
		require.Equal(t, http.StatusOK, status, "the admins' budget is their own")
	}
	status, _, _ = openStream(t, session(edgeAdmin), hs.URL, "")
	require.Equal(t, http.StatusOK, status)

	// A stream closed gives its place back.
	stops[0]()
	srv := hs.Config.Handler.(*Server)
	require.Eventually(t, func() bool { return srv.streams.open(roleRead) == 2 }, 10*time.Second, 5*time.Millisecond)
	status, _, _ = openStream(t, s2, hs.URL, "")
	require.Equal(t, http.StatusOK, status)
}
