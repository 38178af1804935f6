package coordinator_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// waitTimeout bounds every wait for an event: generous, since a failing
// test ends at the first one that does not come.
const waitTimeout = 20 * time.Second

type harness struct {
	t      *testing.T
	ns     *server.Server
	nc     *nats.Conn
	store  *store.Store
	client *events.Client
	events chan events.Event
}

func setup(t *testing.T) *harness {
	t.Helper()
	retries := 3
	h, _ := setupWith(t, coordinator.Config{RetryDelay: 20 * time.Millisecond, Retries: &retries})
	return h
}

// testLogger logs warnings and errors to the test's log.
func testLogger(t *testing.T) *slog.Logger { return coordinator.ServiceLogger(t) }

// executor starts an executor with the given handlers.
func (h *harness) executor(appID string, pool int, handlers map[string]executor.Handler) *executor.Executor {
	h.t.Helper()
	ex := h.newExecutor(executor.Config{AppID: appID, PoolSize: pool})
	for task, handler := range handlers {
		ex.Handle(task, handler)
	}
	require.NoError(h.t, ex.Start(h.t.Context()))
	return ex
}

// newExecutor makes an executor on a connection of its own, not started:
// cfg with a wake-up period of an hour (only notifications wake it), a
// heartbeat of a second and the test's logger unless it says otherwise.
// It is stopped when the test ends.
func (h *harness) newExecutor(cfg executor.Config) *executor.Executor {
	h.t.Helper()
	nc, err := nats.Connect(h.ns.ClientURL())
	require.NoError(h.t, err)
	h.t.Cleanup(nc.Close)
	cfg.WakeupPeriod = cmp.Or(cfg.WakeupPeriod, time.Hour)
	cfg.Heartbeat = cmp.Or(cfg.Heartbeat, time.Second)
	if cfg.Logger == nil {
		cfg.Logger = testLogger(h.t)
	}
	ex, err := executor.New(nc, cfg)
	require.NoError(h.t, err)
	h.t.Cleanup(ex.Stop)
	return ex
}

// allSucceed waits until n jobs have ended, and requires each a success.
func (h *harness) allSucceed(n int) {
	h.t.Helper()
	ended := map[string]events.Event{}
	h.until(func(ev events.Event) bool {
		if ev.State.Final() {
			ended[ev.Group+"/"+ev.JobID] = ev
		}
		return len(ended) == n
	})
	for key, ev := range ended {
		require.Equal(h.t, fairway.StateSuccess, ev.State, key)
	}
}

// until collects events until one satisfies done, and returns them all.
func (h *harness) until(done func(events.Event) bool) []events.Event {
	h.t.Helper()
	var seen []events.Event
	timeout := time.After(waitTimeout)
	for {
		select {
		case ev := <-h.events:
			seen = append(seen, ev)
			if done(ev) {
				return seen
			}
		case <-timeout:
			h.t.Fatalf("no matching event within %s; saw %d events: %v", waitTimeout, len(seen), seen)
		}
	}
}

// final waits until job id reaches a final state and returns its events.
func (h *harness) final(id string) []events.Event {
	h.t.Helper()
	var mine []events.Event
	h.until(func(ev events.Event) bool {
		if ev.JobID != id {
			return false
		}
		mine = append(mine, ev)
		return ev.State.Final()
	})
	return mine
}

func transitions(evs []events.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, string(ev.PreviousState)+">"+string(ev.State))
	}
	return out
}

func echo(_ context.Context, job *executor.Job) error { return job.SetResult(job.Args) }

func submit(t *testing.T, h *harness, sub fairway.Submission) string {
	t.Helper()
	id, err := h.client.Submit(t.Context(), sub)
	require.NoError(t, err)
	return id
}

func TestJobRunsEndToEndWithEvents(t *testing.T) {
	t.Parallel()
	h := setup(t)
	id := runsEndToEnd(t, h)
	logs, err := h.client.Logs(t.Context(), "acme", id)
	require.NoError(t, err)
	require.Len(t, logs, 1)
	require.Contains(t, logs[0].Message, "hello from the task")
	require.Contains(t, logs[0].Message, "n=1")
	// The tenant API does not show another group's job.
	_, err = h.client.Get(t.Context(), "other", id)
	require.ErrorIs(t, err, fairway.ErrNotFound)
}

// runsEndToEnd runs one echo job of group acme (a log line, a progress)
// on executor ex1, checks its events and the job the API reads, and
// returns the job's id.
func runsEndToEnd(t *testing.T, h *harness) string {
	t.Helper()
	h.executor("ex1", 2, map[string]executor.Handler{"echo": func(ctx context.Context, job *executor.Job) error {
		job.Logger.Info("hello from the task", "n", 1)
		job.SetProgress(50)
		return echo(ctx, job)
	}})
	id := submit(t, h, fairway.Submission{Group: "acme", Task: "echo", Args: json.RawMessage(`{"x":1}`)})
	evs := h.final(id)
	require.Equal(t, []string{">waiting", "waiting>scheduled", "scheduled>running", "running>success"}, transitions(evs))
	for _, ev := range evs {
		require.Equal(t, "acme", ev.Group)
		require.Equal(t, "echo", ev.Task)
		require.NotEmpty(t, ev.ID)
		require.False(t, ev.Time.IsZero())
	}
	require.Equal(t, "ex1", evs[3].Executor)
	require.Equal(t, 1, evs[3].Attempt)
	job, err := h.client.Get(t.Context(), "acme", id)
	require.NoError(t, err)
	require.Equal(t, fairway.StateSuccess, job.State)
	require.JSONEq(t, `{"x":1}`, string(job.Result))
	return id
}

func TestRetriesThenSuccessAndExhaustion(t *testing.T) {
	t.Parallel()
	h := setup(t)
	retriesThenExhaustion(t, h, nil)
}

// flaky fails its first args.fails attempts.
func flaky(_ context.Context, job *executor.Job) error {
	var args struct{ Fails int }
	_ = job.Bind(&args)
	if job.Attempt <= args.Fails {
		return errors.New("not yet")
	}
	return nil
}

// retriesThenExhaustion runs flaky jobs on executor ex1 (with more
// handlers, if any): one succeeds at its third attempt, one with one
// retry fails at its second.
func retriesThenExhaustion(t *testing.T, h *harness, more map[string]executor.Handler) {
	t.Helper()
	handlers := map[string]executor.Handler{"flaky": flaky}
	maps.Copy(handlers, more)
	h.executor("ex1", 2, handlers)
	ok := submit(t, h, fairway.Submission{Group: "g", Task: "flaky", Args: json.RawMessage(`{"fails":2}`)})
	require.Equal(t, []string{">waiting", "waiting>scheduled", "scheduled>running", "running>stuck",
		"stuck>scheduled", "scheduled>running", "running>stuck",
		"stuck>scheduled", "scheduled>running", "running>success"}, transitions(h.final(ok)))

	one := 1
	bad := submit(t, h, fairway.Submission{Group: "g", Task: "flaky", Args: json.RawMessage(`{"fails":99}`), MaxRetries: &one})
	evs := h.final(bad)
	last := evs[len(evs)-1]
	require.Equal(t, fairway.StateFailed, last.State, "1 retry: 2 attempts, then failed")
	require.Equal(t, 2, last.Attempt)
	require.Equal(t, "not yet", last.Error)
}

func TestPermanentErrorAndPanic(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.executor("ex1", 1, map[string]executor.Handler{
		"perm":  func(context.Context, *executor.Job) error { return fairway.Permanent(errors.New("bad input")) },
		"panic": func(context.Context, *executor.Job) error { panic("kaboom") },
		"echo":  echo,
	})
	perm := submit(t, h, fairway.Submission{Group: "g", Task: "perm"})
	evs := h.final(perm)
	require.Equal(t, "running>failed", transitions(evs)[len(evs)-1], "a permanent error is not retried")

	zero := 0
	p := submit(t, h, fairway.Submission{Group: "g", Task: "panic", MaxRetries: &zero})
	evs = h.final(p)
	require.Equal(t, fairway.StateFailed, evs[len(evs)-1].State)
	require.Contains(t, evs[len(evs)-1].Error, "kaboom")
	// The executor survived the panic and runs the next job.
	e := submit(t, h, fairway.Submission{Group: "g", Task: "echo"})
	require.Equal(t, fairway.StateSuccess, h.final(e)[3].State)
}

func TestCancelWaitingAndRunningJobs(t *testing.T) {
	t.Parallel()
	h := setup(t)
	started := make(chan string, 1)
	h.executor("ex1", 1, map[string]executor.Handler{"block": func(ctx context.Context, job *executor.Job) error {
		started <- job.ID
		<-ctx.Done()
		return ctx.Err()
	}})
	later := time.Now().Add(time.Hour)
	waiting := submit(t, h, fairway.Submission{Group: "g", Task: "block", RunAt: &later})
	ingested := h.until(func(ev events.Event) bool { return ev.JobID == waiting })
	job, err := h.client.Cancel(t.Context(), "g", waiting)
	require.NoError(t, err)
	require.Equal(t, fairway.StateCancelled, job.State)
	require.Equal(t, []string{">waiting", "waiting>cancelled"}, transitions(append(ingested[len(ingested)-1:], h.final(waiting)...)))

	running := submit(t, h, fairway.Submission{Group: "g", Task: "block"})
	select {
	case id := <-started:
		require.Equal(t, running, id)
	case <-time.After(waitTimeout):
		t.Fatal("the job did not start")
	}
	_, err = h.client.Cancel(t.Context(), "g", running)
	require.NoError(t, err)
	evs := h.final(running)
	require.Equal(t, "running>cancelled", transitions(evs)[len(evs)-1], "cancelled, not stuck, not retried")

	_, err = h.client.Cancel(t.Context(), "g", running)
	require.ErrorIs(t, err, fairway.ErrConflict, "a final job cannot be cancelled")
	_, err = h.client.Cancel(t.Context(), "g", "no-such-job")
	require.ErrorIs(t, err, fairway.ErrNotFound)
}

func TestDuplicateSubmitMakesOneJob(t *testing.T) {
	t.Parallel()
	h := setup(t)
	sub := fairway.Submission{ID: "order-42", Group: "g", Task: "echo"}
	submit(t, h, sub)
	submit(t, h, sub)
	_, err := h.client.SubmitWait(t.Context(), sub)
	require.NoError(t, err)
	// A marker job submitted after: once its event arrives, the duplicates'
	// events would have too.
	marker := submit(t, h, fairway.Submission{Group: "g", Task: "echo"})
	evs := h.until(func(ev events.Event) bool { return ev.JobID == marker })
	count := 0
	for _, ev := range evs {
		if ev.JobID == "order-42" {
			count++
		}
	}
	require.Equal(t, 1, count, "one job, one waiting event")
	jobs, err := h.client.List(t.Context(), events.ListRequest{Group: "g"})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
}

func TestSubmitValidationErrors(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.executor("ex1", 1, map[string]executor.Handler{"echo": echo})
	big := `{"s":"` + strings.Repeat("x", fairway.DefaultMaxArgsSize) + `"}`
	cases := []struct {
		name, group, body, field, message string
	}{
		{"unknown priority", "g", `{"task":"echo","priority":"urgent"}`, "priority", `unknown priority "urgent"`},
		{"missing task", "g", `{}`, "task", "missing"},
		{"task not a token", "g", `{"task":"a.b"}`, "task", "only letters, digits"},
		{"group differs from subject", "g", `{"task":"echo","group":"other"}`, "group", `body names group "other" but the subject names "g"`},
		{"args not an object", "g", `{"task":"echo","args":[1,2]}`, "args", "must be a JSON object, not an array"},
		{"args too large", "g", `{"task":"echo","args":` + big + `}`, "args", "exceeds the limit"},
		{"unknown field", "g", `{"task":"echo","priorty":"high"}`, "priorty", "unknown field"},
		{"wrong type", "g", `{"task":"echo","max_retries":"three"}`, "max_retries", "must be a whole number"},
		{"not json", "g", `{"task":`, "body", "not valid JSON"},
		{"unknown task", "g", `{"task":"nope"}`, "task", `unknown task "nope"`},
	}
	for _, tc := range cases {
		msg, err := h.nc.Request("fairway.api."+tc.group+".submit", []byte(tc.body), waitTimeout)
		require.NoError(t, err, tc.name)
		var reply events.Reply
		require.NoError(t, json.Unmarshal(msg.Data, &reply), tc.name)
		require.NotNil(t, reply.Error, tc.name)
		require.Equal(t, fairway.CodeInvalid, reply.Error.Code, tc.name)
		require.Equal(t, tc.field, reply.Error.Field, tc.name)
		require.Contains(t, reply.Error.Message, tc.message, tc.name)
	}
	// Nothing was stored.
	jobs, err := h.client.List(t.Context(), events.ListRequest{})
	require.NoError(t, err)
	require.Empty(t, jobs)
}

func TestAsyncInvalidSubmissionGetsRejectedEvent(t *testing.T) {
	t.Parallel()
	h := setup(t)
	js, err := h.nc.JetStream()
	require.NoError(t, err)
	_, err = js.Publish("fairway.submit.acme.echo", []byte(`{"id":"bad-1","priority":"urgent"}`))
	require.NoError(t, err)
	_, err = js.Publish("fairway.submit.acme.echo", []byte(`{"id":"bad-2","group":"evil"}`))
	require.NoError(t, err)
	_, err = js.Publish("fairway.submit.acme.echo", []byte(`{"id":"good"}`))
	require.NoError(t, err)
	var rejected []events.Event
	stored := false // the valid job may be stored in a batch of its own, after the others
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateRejected {
			rejected = append(rejected, ev)
		}
		stored = stored || ev.JobID == "good"
		return len(rejected) == 2 && stored
	})
	require.Equal(t, "bad-1", rejected[0].JobID)
	require.Equal(t, "priority", rejected[0].Field)
	require.Equal(t, fairway.CodeInvalid, rejected[0].Code)
	require.Equal(t, "acme", rejected[0].Group)
	require.Equal(t, "group", rejected[1].Field)
	// The valid job next to them was stored.
	job, err := h.client.Get(t.Context(), "acme", "good")
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State)
}

func TestDuplicateAppIDIsRefused(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.executor("same", 1, map[string]executor.Handler{"echo": echo})
	ex, err := executor.New(h.nc, executor.Config{AppID: "same", PoolSize: 1})
	require.NoError(t, err)
	ex.Handle("echo", echo)
	err = ex.Start(t.Context())
	require.Error(t, err)
	require.Contains(t, err.Error(), `app-id "same" is already in use`)
}

func TestFairnessAcrossGroupsEndToEnd(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var mu sync.Mutex
	var order []string
	gate := make(chan struct{})
	h.executor("ex1", 1, map[string]executor.Handler{"work": func(_ context.Context, job *executor.Job) error {
		<-gate
		mu.Lock()
		order = append(order, job.Group)
		mu.Unlock()
		return nil
	}})
	// Group a submits 10 jobs, then group b submits 2: with one slot, b's
	// jobs run second and fourth, not after a's backlog.
	var subs []fairway.Submission
	for range 10 {
		subs = append(subs, fairway.Submission{Group: "a", Task: "work"})
	}
	_, err := h.client.SubmitMany(t.Context(), subs)
	require.NoError(t, err)
	h.until(func(ev events.Event) bool { return ev.State == fairway.StateRunning })
	ids, err := h.client.SubmitMany(t.Context(), []fairway.Submission{{Group: "b", Task: "work"}, {Group: "b", Task: "work"}})
	require.NoError(t, err)
	seen := 0
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateWaiting && (ev.JobID == ids[0] || ev.JobID == ids[1]) {
			seen++
		}
		return seen == 2
	})
	close(gate)
	done := 0
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateSuccess {
			done++
		}
		return done == 12
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"a", "b", "a", "b", "a", "a", "a", "a", "a", "a", "a", "a"}, order)
}

func TestValueRefusedByPostgreSQLRejectsOnlyThatJob(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var bodies [][]byte
	// A number too large for PostgreSQL's numeric: valid JSON, which the
	// database would refuse; validation refuses it first, naming where. (A
	// \u0000, which jsonb refuses too: TestBadTextIsInvalidNamingTheField.)
	for i, args := range []string{`{"n":1}`, `{"n":1e1000000}`, `{"n":3}`} {
		bodies = append(bodies, fmt.Appendf(nil, `{"id":"job-%d","args":%s}`, i, args))
	}
	publishRaw(t, h.nc, h.client.Subjects().Submit("g", "echo"), bodies...)
	var rejected events.Event
	stored := 0
	h.until(func(ev events.Event) bool {
		switch ev.State {
		case fairway.StateRejected:
			rejected = ev
		case fairway.StateWaiting:
			stored++
		}
		return stored == 2 && rejected.ID != ""
	})
	require.Equal(t, "job-1", rejected.JobID)
	require.Equal(t, "args", rejected.Field)
	require.Equal(t, fairway.CodeInvalid, rejected.Code)
	require.Contains(t, rejected.Error, "args.n is a number out of range")
}

func dispatchRequest(t *testing.T, h *harness, waitMS int) (events.DispatchReply, time.Duration) {
	t.Helper()
	return dispatchRequestAs(t, h, "i", waitMS)
}

// registerRaw registers the executor "raw" as instance.
func registerRaw(t *testing.T, h *harness, instance string) {
	t.Helper()
	data, err := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{AppID: "raw", Instance: instance, Host: "h", Slots: 5, Tasks: []string{"echo"}}})
	require.NoError(t, err)
	msg, err := h.nc.Request("fairway.exec.raw.register", data, waitTimeout)
	require.NoError(t, err)
	var reply events.Reply
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	require.Nil(t, reply.Error)
}

func dispatchRequestAs(t *testing.T, h *harness, instance string, waitMS int) (events.DispatchReply, time.Duration) {
	t.Helper()
	return sendDispatch(t, h, events.DispatchRequest{Executor: "raw", Instance: instance, Slots: 5, Tasks: []string{"echo"}, WaitMS: waitMS})
}

func sendDispatch(t *testing.T, h *harness, req events.DispatchRequest) (events.DispatchReply, time.Duration) {
	t.Helper()
	data, err := json.Marshal(req)
	require.NoError(t, err)
	start := time.Now()
	msg, err := h.nc.Request("fairway.exec."+req.Executor+".dispatch", data, waitTimeout)
	require.NoError(t, err)
	var reply events.DispatchReply
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	return reply, time.Since(start)
}

func TestDispatchLongPoll(t *testing.T) {
	t.Parallel()
	h := setup(t)
	registerRaw(t, h, "i")
	// Nothing eligible: the request is held for its wait, then answered empty.
	reply, took := dispatchRequest(t, h, 300)
	require.Nil(t, reply.Error)
	require.Empty(t, reply.Jobs)
	require.GreaterOrEqual(t, took, 300*time.Millisecond)

	// A job submitted while a request is held is in its answer.
	got := make(chan events.DispatchReply, 1)
	go func() {
		r, _ := dispatchRequest(t, h, 10_000)
		got <- r
	}()
	job, err := h.client.SubmitWait(t.Context(), fairway.Submission{Group: "g", Task: "echo"})
	require.NoError(t, err)
	select {
	case r := <-got:
		require.Len(t, r.Jobs, 1)
		require.Equal(t, job.ID, r.Jobs[0].ID)
		require.Equal(t, fairway.StateScheduled, r.Jobs[0].State)
	case <-time.After(waitTimeout):
		t.Fatal("the held request was not answered")
	}
}

// TestDispatchForAnOldInstanceClaimsNothing: a request left over from an
// executor instance that has since restarted (a long poll answered after
// the restart) must not claim jobs that nobody would run; its answer tells
// it to register again.
func TestDispatchForAnOldInstanceClaimsNothing(t *testing.T) {
	t.Parallel()
	h := setup(t)
	registerRaw(t, h, "old")
	registerRaw(t, h, "new") // the restart: "old" has no heartbeat, so it is taken over
	job, err := h.client.SubmitWait(t.Context(), fairway.Submission{Group: "g", Task: "echo"})
	require.NoError(t, err)
	reply, _ := dispatchRequestAs(t, h, "old", 0)
	require.ErrorIs(t, reply.Error, fairway.ErrNotRegistered)
	require.Equal(t, "instance", reply.Error.Field)
	require.Empty(t, reply.Jobs, "claimed for a dead instance")
	reply, _ = dispatchRequestAs(t, h, "new", 0)
	require.Len(t, reply.Jobs, 1)
	require.Equal(t, job.ID, reply.Jobs[0].ID)
}

// registrations is a slog.Handler that reports the app-ids of the executors
// whose registration a coordinator handled.
type registrations chan string

func (r registrations) Enabled(context.Context, slog.Level) bool { return true }
func (r registrations) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r registrations) WithGroup(string) slog.Handler            { return r }

func (r registrations) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message == "executor registered" {
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "executor" {
				r <- a.Value.String()
			}
			return true
		})
	}
	return nil
}

// TestUnknownTaskCheckSeesRegistrationsThroughAnotherCoordinator starts two
// coordinators, registers an executor through one of them, stops that one
// and submits the executor's task: the other coordinator, whose list of
// tasks predates the registration, must accept it.
func TestUnknownTaskCheckSeesRegistrationsThroughAnotherCoordinator(t *testing.T) {
	t.Parallel()
	// stale returns a harness whose only running coordinator has not
	// handled the registration of task "second".
	stale := func(t *testing.T) *harness {
		ns, nc := natstest.Start(t)
		st := storetest.Open(t)
		start := func() (*coordinator.Coordinator, registrations) {
			regs := make(registrations, 10)
			coord, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Logger: slog.New(regs)})
			require.NoError(t, err)
			require.NoError(t, coord.Start(t.Context()))
			t.Cleanup(coord.Stop)
			return coord, regs
		}
		a, regsA := start()
		client, err := events.NewClient(nc, events.ClientOptions{})
		require.NoError(t, err)
		h := &harness{t: t, ns: ns, nc: nc, store: st, client: client, events: make(chan events.Event, 10000)}
		sub, err := client.Subscribe(t.Context(), events.Filter{}, func(ev events.Event) { h.events <- ev })
		require.NoError(t, err)
		t.Cleanup(sub.Stop)

		// Both coordinators know "first", so they refuse the tasks they do
		// not know.
		h.executor("ex1", 1, map[string]executor.Handler{"first": echo})
		require.Equal(t, "ex1", <-regsA)
		b, regsB := start()
		h.executor("ex2", 1, map[string]executor.Handler{"second": echo})
		select {
		case id := <-regsA:
			require.Equal(t, "ex2", id)
			a.Stop()
		case id := <-regsB:
			require.Equal(t, "ex2", id)
			b.Stop()
		case <-time.After(waitTimeout):
			t.Fatal("no coordinator logged the registration of ex2")
		}
		return h
	}

	t.Run("ingest", func(t *testing.T) {
		t.Parallel()
		h := stale(t)
		id := submit(t, h, fairway.Submission{Group: "g", Task: "second"})
		evs := h.until(func(ev events.Event) bool { return ev.JobID == id })
		require.Equal(t, fairway.StateWaiting, evs[len(evs)-1].State, "stored, not rejected: %v", evs[len(evs)-1])
		evs = h.final(id)
		require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)
	})

	t.Run("api", func(t *testing.T) {
		t.Parallel()
		h := stale(t)
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for range 10 {
			wg.Go(func() {
				_, err := h.client.SubmitWait(t.Context(), fairway.Submission{Group: "g", Task: "second"})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		_, err := h.client.SubmitWait(t.Context(), fairway.Submission{Group: "g", Task: "third"})
		require.ErrorIs(t, err, fairway.ErrInvalid)
		require.ErrorContains(t, err, `unknown task "third": no executor has registered it (known tasks: first, second)`)
	})
}

// messages is a slog.Handler that passes on each record's message.
type messages chan string

func (m messages) Enabled(context.Context, slog.Level) bool { return true }
func (m messages) WithAttrs([]slog.Attr) slog.Handler       { return m }
func (m messages) WithGroup(string) slog.Handler            { return m }
func (m messages) Handle(_ context.Context, rec slog.Record) error {
	select {
	case m <- rec.Message:
	default:
	}
	return nil
}

// TestStartWaitsForJetStream: a coordinator started before JetStream is
// ready (a cluster electing its leader, a server restarting) waits for it
// instead of exiting.
func TestStartWaitsForJetStream(t *testing.T) {
	t.Parallel()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	ns.Start()
	t.Cleanup(ns.Shutdown)
	require.True(t, ns.ReadyForConnections(10*time.Second))
	nc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)

	logs := make(messages, 100)
	coord, err := coordinator.New(storetest.Public(storetest.Open(t)), nc, coordinator.Config{Logger: slog.New(logs)})
	require.NoError(t, err)
	started := make(chan error, 1)
	go func() { started <- coord.Start(t.Context()) }()
	t.Cleanup(coord.Stop)
	for msg := range logs {
		if msg == "JetStream not ready; trying again" {
			break
		}
	}
	require.NoError(t, ns.EnableJetStream(&server.JetStreamConfig{StoreDir: t.TempDir()}))
	select {
	case err := <-started:
		require.NoError(t, err)
	case <-time.After(waitTimeout):
		t.Fatal("the coordinator did not start once JetStream was enabled")
	}
}

// TestHeldDelayedAndExpiringJobs: a pending job runs once released through
// the API; one with a trigger time runs when it comes; one that expires
// before it can start fails with "expired"; a delayed one is not handed out
// before its time. Times are a fraction of a second ahead: the coordinator
// checks them every second, and the test awaits their events. Both
// engines (the journal's leader releases and expires by its own timers).
func TestHeldDelayedAndExpiringJobs(t *testing.T) {
	t.Parallel()
	heldDelayedAndExpiring(t, setupRetrying(t))
}

func heldDelayedAndExpiring(t *testing.T, h *harness) {
	h.executor("ex1", 2, map[string]executor.Handler{"echo": echo})
	soon := time.Now().Add(300 * time.Millisecond)

	held := submit(t, h, fairway.Submission{Group: "g", Task: "echo", Pending: true})
	triggered := submit(t, h, fairway.Submission{Group: "g", Task: "echo", TriggerAfter: &soon})
	// Held forever, expiring soon: it can never start. Later than soon: a
	// job stored after its expiry is refused as one that could never run
	// (ingest took 300 ms once, on a loaded machine).
	expiresAt := time.Now().Add(2 * time.Second)
	expiring := submit(t, h, fairway.Submission{Group: "g", Task: "echo", Pending: true, ExpiresAt: &expiresAt})
	delayed := submit(t, h, fairway.Submission{Group: "g", Task: "echo", RunIn: "1h"})
	later := time.Now().Add(time.Hour)
	far := submit(t, h, fairway.Submission{Group: "g", Task: "echo", TriggerAfter: &later})

	byJob := map[string][]events.Event{}
	h.until(func(ev events.Event) bool {
		byJob[ev.JobID] = append(byJob[ev.JobID], ev)
		return len(byJob[triggered]) > 0 && byJob[triggered][len(byJob[triggered])-1].State.Final() &&
			len(byJob[expiring]) > 0 && byJob[expiring][len(byJob[expiring])-1].State.Final()
	})
	require.Equal(t, []string{">pending", "pending>waiting", "waiting>scheduled", "scheduled>running", "running>success"}, transitions(byJob[triggered]))
	evs := byJob[expiring]
	require.Equal(t, []string{">pending", "pending>failed"}, transitions(evs))
	require.Equal(t, "expired", evs[len(evs)-1].Error)

	job, err := h.client.Get(t.Context(), "g", far)
	require.NoError(t, err)
	require.Equal(t, fairway.StatePending, job.State, "its trigger is an hour away")
	require.NotNil(t, job.TriggerAfter)
	require.WithinDuration(t, later, *job.TriggerAfter, time.Millisecond)
	job, err = h.client.Get(t.Context(), "g", held)
	require.NoError(t, err)
	require.Equal(t, fairway.StatePending, job.State, "a pending job without a trigger waits for its release")
	job, err = h.client.SetPriority(t.Context(), "g", held, fairway.PriorityHigh)
	require.NoError(t, err)
	require.Equal(t, fairway.PriorityHigh, job.Priority)
	_, err = h.client.Release(t.Context(), "g", held)
	require.NoError(t, err)
	require.Equal(t, []string{">pending", "pending>waiting", "waiting>scheduled", "scheduled>running", "running>success"}, transitions(append(byJob[held], h.final(held)...)))
	_, err = h.client.Release(t.Context(), "g", held)
	require.ErrorContains(t, err, "is success, not pending")

	job, err = h.client.Get(t.Context(), "g", delayed)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State, "a job delayed by an hour does not run now")
	require.WithinDuration(t, time.Now().Add(time.Hour), job.RunAt, time.Minute)
}

// TestDispatchSentAgainGetsTheJobsItClaimed: an executor whose dispatch
// answer was lost asks again under the same request id and gets the jobs
// already claimed for it, instead of leaving them scheduled for three
// leases.
func TestDispatchSentAgainGetsTheJobsItClaimed(t *testing.T) {
	t.Parallel()
	dispatchSentAgainGetsTheJobsItClaimed(t, setupRetrying(t))
}

func dispatchSentAgainGetsTheJobsItClaimed(t *testing.T, h *harness) {
	registerRaw(t, h, "i")
	job, err := h.client.SubmitWait(t.Context(), fairway.Submission{Group: "g", Task: "echo"})
	require.NoError(t, err)
	req := events.DispatchRequest{Executor: "raw", Instance: "i", Slots: 5, Tasks: []string{"echo"}, RequestID: "r1"}
	lost, _ := sendDispatch(t, h, req) // the executor never sees this answer
	require.Len(t, lost.Jobs, 1)

	other, _ := sendDispatch(t, h, events.DispatchRequest{Executor: "raw", Instance: "i", Slots: 5, Tasks: []string{"echo"}, RequestID: "r2"})
	require.Nil(t, other.Error)
	require.Empty(t, other.Jobs, "another request's jobs are not handed out")

	again, _ := sendDispatch(t, h, req)
	require.Nil(t, again.Error)
	require.Len(t, again.Jobs, 1)
	require.Equal(t, job.ID, again.Jobs[0].ID)
	require.Equal(t, lost.Jobs[0].Attempt, again.Jobs[0].Attempt, "the same attempt, not a new claim")
	require.Equal(t, fairway.StateScheduled, again.Jobs[0].State)
	// The answers carry no lease: the executors' heartbeats are the lease
	// of every job they hold.
}

// TestExecutorSpeaksOnlyForItself: an executor's identity is the app-id in
// the subject it sends on. Registrations, dispatch requests and reports
// naming another executor change nothing.
func TestExecutorSpeaksOnlyForItself(t *testing.T) {
	t.Parallel()
	h := setup(t)
	registerRaw(t, h, "i")
	job, err := h.client.SubmitWait(t.Context(), fairway.Submission{Group: "g", Task: "echo"})
	require.NoError(t, err)

	// "evil" registers as "raw", and asks for jobs as "raw".
	data, err := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{AppID: "raw", Instance: "evil", Slots: 5, Tasks: []string{"echo"}}})
	require.NoError(t, err)
	msg, err := h.nc.Request("fairway.exec.evil.register", data, waitTimeout)
	require.NoError(t, err)
	var reply events.Reply
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	require.NotNil(t, reply.Error, "registered under another executor's app-id")
	require.Equal(t, "executor", reply.Error.Field)
	data, err = json.Marshal(events.DispatchRequest{Executor: "raw", Instance: "i", Slots: 5, Tasks: []string{"echo"}})
	require.NoError(t, err)
	msg, err = h.nc.Request("fairway.exec.evil.dispatch", data, waitTimeout)
	require.NoError(t, err)
	var dreply events.DispatchReply
	require.NoError(t, json.Unmarshal(msg.Data, &dreply))
	require.NotNil(t, dreply.Error)
	require.Empty(t, dreply.Jobs, "claimed jobs for another executor")

	// "raw" claims the job; "evil" reports its success, first naming
	// "raw", then naming no one. Then "raw" reports the start.
	claimed, _ := dispatchRequestAs(t, h, "i", 0)
	require.Len(t, claimed.Jobs, 1)
	require.Equal(t, job.ID, claimed.Jobs[0].ID)
	attempt := claimed.Jobs[0].Attempt
	js, err := jetstream.New(h.nc)
	require.NoError(t, err)
	report := func(subject string, r events.Report) {
		data, err := json.Marshal([]events.Report{r})
		require.NoError(t, err)
		_, err = js.Publish(t.Context(), subject, data)
		require.NoError(t, err)
	}
	forged := events.Report{Type: events.ReportDone, Group: "g", JobID: job.ID, Attempt: attempt, Executor: "raw", Instance: "i", Time: time.Now(),
		Outcome: events.OutcomeSuccess, Result: json.RawMessage(`{"forged":true}`)}
	report("fairway.results.evil", forged)
	forged.Executor = ""
	report("fairway.results.evil", forged)
	// An outcome only coordinators decide, or none at all, is dropped.
	for _, outcome := range []fairway.Outcome{fairway.OutcomeLost, "", "exploded"} {
		report("fairway.results.raw", events.Report{Type: events.ReportDone, Group: "g", JobID: job.ID, Attempt: attempt, Executor: "raw", Instance: "i", Time: time.Now(), Outcome: outcome})
	}
	report("fairway.results.raw", events.Report{Type: events.ReportStarted, Group: "g", JobID: job.ID, Attempt: attempt, Executor: "raw", Instance: "i", Time: time.Now()})
	h.until(func(ev events.Event) bool { return ev.JobID == job.ID && ev.State == fairway.StateRunning })
	got, err := h.client.Get(t.Context(), "g", job.ID)
	require.NoError(t, err)
	require.Equal(t, fairway.StateRunning, got.State, "a forged report, or one of an unknown outcome, applied")
	require.Empty(t, got.Result)
}

// TestAPIVerbsDecodeOneWay: every verb refuses unknown fields (a misspelt
// field is an error, not ignored), and a verb asked on the wrong API says
// where to ask.
func TestAPIVerbsDecodeOneWay(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ask := func(subject, body string) *fairway.Error {
		t.Helper()
		msg, err := h.nc.Request(subject, []byte(body), waitTimeout)
		require.NoError(t, err)
		var reply events.Reply
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
		return reply.Error
	}
	for subject, body := range map[string]string{
		"fairway.api.g.get":             `{"id":"x","idd":"y"}`,
		"fairway.api.g.list":            `{"limt":5}`,
		"fairway.admin.cancel":          `{"group":"g","id":"x","force":true}`,
		"fairway.admin.periodic-enable": `{"id":"p","enabled":true}`,
		"fairway.api.g.submit":          `{"task":"echo","argz":{}}`,
	} {
		e := ask(subject, body)
		require.NotNil(t, e, subject)
		require.Equal(t, fairway.CodeInvalid, e.Code, subject)
		require.Contains(t, e.Message, "unknown field", subject)
	}
	e := ask("fairway.admin.submit", `{"task":"echo"}`)
	require.NotNil(t, e)
	require.Contains(t, e.Message, "fairway.api.<group>.submit")
	e = ask("fairway.api.g.executors", ``)
	require.NotNil(t, e)
	require.Contains(t, e.Message, "fairway.admin.executors")
	e = ask("fairway.api.g.frobnicate", ``)
	require.NotNil(t, e)
	require.Contains(t, e.Message, "known: bulk, cancel, drain, executors, get, graph, groups, limit-delete, limit-set, limits, list, logs, partitions, pause, periodic-delete")
	require.Nil(t, ask("fairway.api.g.list", ``), "an empty body is an empty request")
}

// TestBatchMessageIsStoredAndRefusedElementByElement: one message of the
// submit stream carries an array of submissions. Each is validated,
// stored or refused on its own, with its own event; an element without an
// id gets one that is the same on a redelivery; the same message again
// stores nothing twice.
func TestBatchMessageIsStoredAndRefusedElementByElement(t *testing.T) {
	t.Parallel()
	h := setup(t)
	body := []byte(`[{"id":"b-1","args":{"n":1}},
		{"id":"b-bad","priority":"urgent"},
		{"id":"b-evil","group":"evil"},
		{"args":{"n":4}},
		{"id":"b-5","args":{"n":5}}]`)
	subject := h.client.Subjects().Submit("acme", "echo")
	publishRaw(t, h.nc, subject, body)
	var rejected []events.Event
	var stored []events.Event
	h.until(func(ev events.Event) bool {
		switch ev.State {
		case fairway.StateRejected:
			rejected = append(rejected, ev)
		case fairway.StateWaiting:
			stored = append(stored, ev)
		}
		return len(rejected) == 2 && len(stored) == 3
	})
	require.Equal(t, "b-bad", rejected[0].JobID)
	require.Equal(t, "priority", rejected[0].Field)
	require.Equal(t, "b-evil", rejected[1].JobID)
	require.Equal(t, "group", rejected[1].Field)
	var noID string
	for _, ev := range stored {
		require.Equal(t, "acme", ev.Group)
		if ev.JobID != "b-1" && ev.JobID != "b-5" {
			noID = ev.JobID
		}
	}
	require.NotEmpty(t, noID, "the element without an id is stored under one of its own: %v", stored)
	job, err := h.client.Get(t.Context(), "acme", noID)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":4}`, string(job.Args))

	// The same body published again: the elements with an id are
	// duplicates and stored once; the one without is a new submission (a
	// redelivery of the same message gives it the same id, a new message a
	// new one, as for a message of one submission).
	publishRaw(t, h.nc, subject, body)
	// In either order: the journal's leader publishes the stored job's
	// event when it folds its row, which may come before the rejection.
	var evil, stored2 bool
	h.until(func(ev events.Event) bool {
		evil = evil || ev.State == fairway.StateRejected && ev.JobID == "b-evil"
		stored2 = stored2 || ev.State == fairway.StateWaiting
		return evil && stored2
	})
	jobs, err := h.client.List(t.Context(), events.ListRequest{Group: "acme"})
	require.NoError(t, err)
	count := map[string]int{}
	for _, j := range jobs {
		count[j.ID]++
	}
	require.Len(t, jobs, 4, "%v", count)
	require.Equal(t, 1, count["b-1"])
	require.Equal(t, 1, count["b-5"])
}

// TestSubmitManySendsBatches: SubmitMany's jobs reach the store through a
// few messages of arrays, one group's in their order.
func TestSubmitManySendsBatches(t *testing.T) {
	t.Parallel()
	submitManySendsBatches(t, setupRetrying(t))
}

// submitManySendsBatches is TestSubmitManySendsBatches on h's engine.
func submitManySendsBatches(t *testing.T, h *harness) {
	var subs []fairway.Submission
	for i := range 2500 {
		subs = append(subs, fairway.Submission{Group: []string{"a", "b"}[i%2], Task: "echo", Args: fmt.Appendf(nil, `{"i":%d}`, i)})
	}
	js, err := jetstream.New(h.nc)
	require.NoError(t, err)
	stream, err := js.Stream(t.Context(), h.client.Subjects().SubmitStream())
	require.NoError(t, err)
	before, err := stream.Info(t.Context())
	require.NoError(t, err)
	ids, err := h.client.SubmitMany(t.Context(), subs)
	require.NoError(t, err)
	after, err := stream.Info(t.Context())
	require.NoError(t, err)
	// 1,250 per group, 100 to a message: 13 messages each.
	require.Equal(t, uint64(26), after.State.LastSeq-before.State.LastSeq, "messages for 2,500 jobs of two groups")
	stored := map[string]bool{}
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateWaiting {
			stored[ev.JobID] = true
		}
		return len(stored) == len(ids)
	})
	// Each group's jobs were stored in the order they were submitted.
	index := map[string]int{}
	for i, id := range ids {
		index[id] = i
	}
	for _, g := range []string{"a", "b"} {
		jobs, err := h.client.List(t.Context(), events.ListRequest{Group: g, Limit: 1000})
		require.NoError(t, err)
		require.Len(t, jobs, 1000)
		for i := 1; i < len(jobs); i++ {
			// Listed newest first.
			prev, cur := jobs[i-1], jobs[i]
			require.Greater(t, index[prev.ID], index[cur.ID], "group %s: submission %d listed before submission %d", g, index[cur.ID], index[prev.ID])
			require.True(t, prev.Submitted.After(cur.Submitted), "group %s: submission %d stored at %s, %d at %s", g,
				index[prev.ID], prev.Submitted, index[cur.ID], cur.Submitted)
		}
	}
}

// TestIngestHandsJobsToAnIdleExecutor: an executor waits in a long poll
// (its claim found nothing); a job submitted now is stored already
// scheduled for it and is the answer to its request, without a claim. A
// job it does not run is stored waiting.
func TestIngestHandsJobsToAnIdleExecutor(t *testing.T) {
	t.Parallel()
	ingestHandsJobsToAnIdleExecutor(t)
}

func ingestHandsJobsToAnIdleExecutor(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, coord := setupWith(t, coordinator.Config{Metrics: reg})
	registerRaw(t, h, "i")
	// Another executor runs task other (it never asks for work).
	data, err := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{AppID: "raw2", Instance: "j", Host: "h", Slots: 1, Tasks: []string{"other"}}})
	require.NoError(t, err)
	_, err = h.nc.Request("fairway.exec.raw2.register", data, waitTimeout)
	require.NoError(t, err)
	other := submit(t, h, fairway.Submission{Group: "g", Task: "other"})
	h.until(func(ev events.Event) bool { return ev.JobID == other })
	got := make(chan events.DispatchReply, 1)
	go func() {
		r, _ := dispatchRequest(t, h, 10_000)
		got <- r
	}()
	require.Eventually(t, func() bool { return coord.Parked() == 1 }, waitTimeout, 5*time.Millisecond, "the request is held")
	id := submit(t, h, fairway.Submission{Group: "g", Task: "echo", Args: []byte(`{"n":1}`)})
	var r events.DispatchReply
	select {
	case r = <-got:
	case <-time.After(waitTimeout):
		t.Fatal("the held request was not answered")
	}
	require.Nil(t, r.Error)
	require.Len(t, r.Jobs, 1)
	j := r.Jobs[0]
	require.Equal(t, id, j.ID)
	require.Equal(t, fairway.StateScheduled, j.State)
	require.Equal(t, 1, j.Attempt)
	require.JSONEq(t, `{"n":1}`, string(j.Args))
	handed := 0.0
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == "fairway_jobs_handed_over_total" {
			handed = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	// On the journal, the leader that ingests hands over in the
	// submission's transaction (journal.Leader.HandOver).
	require.Equal(t, 1.0, handed, "handed over at ingest, not claimed")
	evs := h.until(func(ev events.Event) bool { return ev.JobID == id && ev.State == fairway.StateScheduled })
	require.Equal(t, []string{">waiting", "waiting>scheduled"}, transitions(filterJob(evs, id)))
	job, err := h.client.Get(t.Context(), "g", other)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State, "a task the executor does not run waits")
}

func filterJob(evs []events.Event, id string) []events.Event {
	var out []events.Event
	for _, ev := range evs {
		if ev.JobID == id {
			out = append(out, ev)
		}
	}
	return out
}

// TestDispatchIsBoundedByTheRegistration: an executor gets only what its
// registered instance may run. A request without an instance, or under an
// instance never registered, gets no job; a request for a task the
// instance did not register gets none of that task's jobs; and a request
// for more slots than the registration's pool and as many held gets at
// most that many.
func TestDispatchIsBoundedByTheRegistration(t *testing.T) {
	t.Parallel()
	h := setup(t)
	registerRaw(t, h, "i") // 5 slots, task echo
	data, err := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{AppID: "raw2", Instance: "j", Host: "h", Slots: 1, Tasks: []string{"other"}}})
	require.NoError(t, err)
	_, err = h.nc.Request("fairway.exec.raw2.register", data, waitTimeout)
	require.NoError(t, err)
	var subs []fairway.Submission
	for range 20 {
		subs = append(subs, fairway.Submission{Group: "g", Task: "echo"}, fairway.Submission{Group: "g", Task: "other"})
	}
	_, err = h.client.SubmitMany(t.Context(), subs)
	require.NoError(t, err)
	h.stored(len(subs))

	reply, _ := sendDispatch(t, h, events.DispatchRequest{Executor: "raw", Slots: 100, Tasks: []string{"echo", "other"}})
	require.NotNil(t, reply.Error, "no instance")
	require.Equal(t, "instance", reply.Error.Field)
	require.Empty(t, reply.Jobs)
	reply, _ = sendDispatch(t, h, events.DispatchRequest{Executor: "raw", Instance: "forged", Slots: 100, Tasks: []string{"echo", "other"}})
	require.NotNil(t, reply.Error, "an instance never registered")
	require.Empty(t, reply.Jobs)

	reply, _ = sendDispatch(t, h, events.DispatchRequest{Executor: "raw", Instance: "i", Slots: 100, Tasks: []string{"other"}})
	require.Nil(t, reply.Error)
	require.Empty(t, reply.Jobs, "a task raw did not register")

	reply, _ = sendDispatch(t, h, events.DispatchRequest{Executor: "raw", Instance: "i", Slots: 100, Tasks: []string{"echo", "other"}})
	require.Nil(t, reply.Error)
	require.Len(t, reply.Jobs, 10, "twice the 5 slots registered")
	for _, j := range reply.Jobs {
		require.Equal(t, "echo", j.Task)
	}
}
