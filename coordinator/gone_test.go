package coordinator_test

// Executors that leave: a graceful shutdown deregisters, a silent executor
// is marked gone after several leases, and a job whose task no live
// executor runs says so.

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// logHook is a slog handler that passes records on to the test log and
// sends those with one of its messages, at any level, to a channel: a test
// awaits a coordinator's decision through its log line instead of polling.
type logHook struct {
	next     slog.Handler
	messages []string
	records  chan slog.Record
}

func (h *logHook) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHook) Handle(ctx context.Context, r slog.Record) error {
	if slices.Contains(h.messages, r.Message) {
		select {
		case h.records <- r.Clone():
		default:
		}
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *logHook) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHook{next: h.next.WithAttrs(as), messages: h.messages, records: h.records}
}

func (h *logHook) WithGroup(name string) slog.Handler {
	return &logHook{next: h.next.WithGroup(name), messages: h.messages, records: h.records}
}

// await returns the next record with message whose attribute key is
// value, skipping the records before it, and fails the test after
// waitTimeout.
func (h *logHook) await(t *testing.T, message, key, value string) slog.Record {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case r := <-h.records:
			found := false
			r.Attrs(func(a slog.Attr) bool {
				found = a.Key == key && a.Value.String() == value
				return !found
			})
			if r.Message == message && found {
				return r
			}
		case <-timeout:
			t.Fatalf("no log line %q with %s=%s within %s", message, key, value, waitTimeout)
		}
	}
}

// The coordinator's log lines the tests await.
const (
	logGone       = "executor gone: no heartbeat for several leases; its tasks no longer count as run until it registers again"
	logRegistered = "executor registered"
)

// setupLease is setup with a short lease, so that a silent executor is
// marked gone within seconds, and a hook on the coordinator's log lines
// logGone and logRegistered.
func setupLease(t *testing.T, lease time.Duration) (*harness, *logHook) {
	t.Helper()
	ns, nc := natstest.Start(t)
	st := storetest.Open(t)
	hook := &logHook{next: testLogger(t).Handler(), messages: []string{logGone, logRegistered}, records: make(chan slog.Record, 1000)}
	retries := 3
	coord, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{
		RetryDelay: 20 * time.Millisecond,
		Retries:    &retries,
		Lease:      lease,
		Logger:     slog.New(hook),
	})
	require.NoError(t, err)
	require.NoError(t, coord.Start(t.Context()))
	t.Cleanup(coord.Stop)
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	h := &harness{t: t, ns: ns, nc: nc, store: st, client: client, events: make(chan events.Event, 10000)}
	sub, err := client.Subscribe(t.Context(), events.Filter{}, func(ev events.Event) { h.events <- ev })
	require.NoError(t, err)
	t.Cleanup(sub.Stop)
	return h, hook
}

// startExecutor starts an executor on a connection of its own, which it
// returns, with the given heartbeat period, running tasks with echo.
func (h *harness) startExecutor(appID string, heartbeat time.Duration, tasks ...string) (*executor.Executor, *nats.Conn) {
	h.t.Helper()
	handlers := map[string]executor.Handler{}
	for _, task := range tasks {
		handlers[task] = echo
	}
	return h.startExecutorHandlers(appID, heartbeat, handlers)
}

// startExecutorWith is startExecutor of one task run by handler.
func (h *harness) startExecutorWith(appID string, heartbeat time.Duration, task string, handler executor.Handler) (*executor.Executor, *nats.Conn) {
	h.t.Helper()
	return h.startExecutorHandlers(appID, heartbeat, map[string]executor.Handler{task: handler})
}

func (h *harness) startExecutorHandlers(appID string, heartbeat time.Duration, handlers map[string]executor.Handler) (*executor.Executor, *nats.Conn) {
	h.t.Helper()
	nc, err := nats.Connect(h.ns.ClientURL())
	require.NoError(h.t, err)
	h.t.Cleanup(nc.Close)
	ex, err := executor.New(nc, executor.Config{AppID: appID, PoolSize: 2, WakeupPeriod: time.Hour, Heartbeat: heartbeat, Logger: testLogger(h.t)})
	require.NoError(h.t, err)
	for task, handler := range handlers {
		ex.Handle(task, handler)
	}
	require.NoError(h.t, ex.Start(h.t.Context()))
	h.t.Cleanup(ex.Stop)
	return ex, nc
}

func (h *harness) executorState(appID string) fairway.Executor {
	h.t.Helper()
	execs, err := h.store.Executors(h.t.Context())
	require.NoError(h.t, err)
	i := slices.IndexFunc(execs, func(e fairway.Executor) bool { return e.AppID == appID })
	require.GreaterOrEqual(h.t, i, 0, "executor %s is not listed", appID)
	return execs[i]
}

func TestShutdownDeregisters(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := t.Context()
	leaving, _ := h.startExecutor("leaving", time.Second, "leaves")
	h.startExecutor("staying", time.Second, "stays")
	require.Equal(t, fairway.ExecutorLive, h.executorState("leaving").State)

	shutdownCtx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	require.NoError(t, leaving.Shutdown(shutdownCtx))

	// Shutdown returns once a coordinator has taken note.
	gone := h.executorState("leaving")
	require.Equal(t, fairway.ExecutorDeregistered, gone.State)
	require.NotNil(t, gone.Left)
	require.Zero(t, gone.Running)
	execs, err := h.client.Executors(ctx)
	require.NoError(t, err)
	require.Equal(t, "staying", execs[0].AppID, "live executors are listed first")
	require.Equal(t, fairway.ExecutorDeregistered, execs[1].State)

	// A task only the executor that left ran is accepted, with a warning;
	// the job says it has no executor.
	reply, err := h.client.SubmitReply(ctx, fairway.Submission{Group: "acme", Task: "leaves"})
	require.NoError(t, err)
	require.Contains(t, reply.Warning, `no live executor runs task "leaves"`)
	require.True(t, reply.Job.NoExecutor)
	job, err := h.client.Get(ctx, "acme", reply.ID)
	require.NoError(t, err)
	require.True(t, job.NoExecutor)

	// A task a live executor runs: no warning.
	reply, err = h.client.SubmitReply(ctx, fairway.Submission{Group: "acme", Task: "stays"})
	require.NoError(t, err)
	require.Empty(t, reply.Warning)
	h.final(reply.ID)
	job, err = h.client.Get(ctx, "acme", reply.ID)
	require.NoError(t, err)
	require.False(t, job.NoExecutor)

	// A task no executor ever registered is still refused.
	_, err = h.client.SubmitReply(ctx, fairway.Submission{Group: "acme", Task: "never"})
	require.ErrorContains(t, err, `unknown task "never"`)
}

func TestDeregisterNamesTheRegisteredInstance(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.startExecutor("w1", time.Second, "echo")
	// Another instance of the app-id (an old one shutting down late)
	// changes nothing.
	data := []byte(`{"executor":"w1","instance":"not-the-registered-one"}`)
	msg, err := h.nc.Request(events.NewSubjects("").Exec("w1", events.ExecDeregister), data, waitTimeout)
	require.NoError(t, err)
	require.Contains(t, string(msg.Data), `"not_registered"`)
	// Nor does a body that names another executor than its subject.
	data = []byte(`{"executor":"w1","instance":"x"}`)
	msg, err = h.nc.Request(events.NewSubjects("").Exec("w2", events.ExecDeregister), data, waitTimeout)
	require.NoError(t, err)
	require.Contains(t, string(msg.Data), `"field":"executor"`)
	require.Equal(t, fairway.ExecutorLive, h.executorState("w1").State)
}

func TestDeadExecutorIsMarkedGone(t *testing.T) {
	t.Parallel()
	h, logs := setupLease(t, time.Second)
	ctx := t.Context()
	_, nc := h.startExecutor("doomed", 200*time.Millisecond, "fragile")
	h.startExecutor("healthy", 200*time.Millisecond, "robust")

	// Killed: no deregistration, no more heartbeats.
	nc.Close()
	logs.await(t, logGone, "executor", "doomed")
	dead := h.executorState("doomed")
	require.Equal(t, fairway.ExecutorGone, dead.State)
	require.NotNil(t, dead.Left)
	require.Equal(t, fairway.ExecutorLive, h.executorState("healthy").State, "an executor that sends heartbeats stays live")

	reply, err := h.client.SubmitReply(ctx, fairway.Submission{Group: "acme", Task: "fragile"})
	require.NoError(t, err)
	require.Contains(t, reply.Warning, `no live executor runs task "fragile"`)
	job, err := h.client.Get(ctx, "acme", reply.ID)
	require.NoError(t, err)
	require.True(t, job.NoExecutor)

	// A new instance under the app-id takes over at once (the gone one is
	// not asked whether it still runs) and runs the job.
	h.startExecutor("doomed", 200*time.Millisecond, "fragile")
	require.Equal(t, fairway.ExecutorLive, h.executorState("doomed").State)
	evs := h.final(reply.ID)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)
}

// An executor cut off for several leases (here: one that sends no
// heartbeat within them) is marked gone; as soon as it is heard again its
// dispatch request is answered not_registered, and it registers again,
// under the same instance, and takes jobs.
func TestGoneExecutorRegistersAgain(t *testing.T) {
	t.Parallel()
	h, logs := setupLease(t, 2*time.Second)
	h.startExecutor("partitioned", time.Hour, "echo")
	logs.await(t, logRegistered, "executor", "partitioned")
	instance := h.executorState("partitioned").Instance

	logs.await(t, logGone, "executor", "partitioned")
	logs.await(t, logRegistered, "executor", "partitioned")
	back := h.executorState("partitioned")
	require.Equal(t, instance, back.Instance, "the same instance registered again")
	require.Equal(t, fairway.ExecutorLive, back.State)
	require.Nil(t, back.Left)

	reply, err := h.client.SubmitReply(t.Context(), fairway.Submission{Group: "acme", Task: "echo"})
	require.NoError(t, err)
	require.Empty(t, reply.Warning)
	evs := h.final(reply.ID)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)
	require.Equal(t, "partitioned", evs[len(evs)-1].Executor)
}

// TestAHeartbeatIsAnsweredOnceRecorded: a heartbeat sent as a request is
// answered by the coordinator that recorded it (the executor sends it
// again otherwise, so that a coordinator cut off from PostgreSQL cannot
// swallow it), and the registry's last heartbeat moves. Without the
// answer, the request runs out.
func TestAHeartbeatIsAnsweredOnceRecorded(t *testing.T) {
	t.Parallel()
	h := setup(t)
	_, nc := h.startExecutorWith("hb", time.Hour, "work", echo)
	before := h.executorState("hb")
	subject := h.client.Subjects().Exec("hb", events.ExecHeartbeat)
	data, err := json.Marshal(events.Heartbeat{Executor: "hb", Instance: before.Instance, Slots: 2})
	require.NoError(t, err)
	_, err = nc.Request(subject, data, waitTimeout)
	require.NoError(t, err, "a recorded heartbeat is answered")
	require.True(t, h.executorState("hb").LastHeartbeat.After(before.LastHeartbeat), "and recorded")
}
