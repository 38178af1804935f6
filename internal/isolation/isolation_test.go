// Package isolation_test attacks a Fairway cluster with a tenant's and an
// executor's credentials, as the README's threat model says they may be
// held by an adversary. It runs a real nats-server process in operator mode,
// configured by 'fairway creds server-config' exactly as in production, with
// a real PostgreSQL, a coordinator and an executor; tenant acme works
// normally while tenant globex (and a rogue executor) try every attack on
// acme. Each attack must be refused or have no effect.
package isolation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/devtest"
	"github.com/fairwayhq/fairway/internal/heavytest"
	"github.com/fairwayhq/fairway/internal/natsauth"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	heavytest.Exclusive() // not beside the fault suite: both measure delays
	storetest.Main(m)
}

const waitTimeout = 20 * time.Second

// natsServerBinary builds nats-server from the module cache once per test
// binary.
var natsServerBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "fairway-isolation-bin-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "nats-server")
	cmd := exec.Command("go", "build", "-o", out, "github.com/nats-io/nats-server/v2")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build nats-server: %w\n%s", err, b)
	}
	return out, nil
})

// startNATS runs nats-server with the configuration an operator would
// write: 'fairway creds server-config' included from a file.
func startNATS(t *testing.T, k *natsauth.Keyring, dir string) string {
	t.Helper()
	bin, err := natsServerBinary()
	require.NoError(t, err)
	accounts, err := k.ServerConfig(filepath.Join(dir, "jwt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "accounts.conf"), []byte(accounts), 0o600))
	port := devtest.FreePort(t)
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\nmax_payload: 8MB\njetstream: { store_dir: %q }\ninclude ./accounts.conf\n", port, filepath.Join(dir, "js"))
	confPath := filepath.Join(dir, "nats-server.conf")
	require.NoError(t, os.WriteFile(confPath, []byte(conf), 0o600))
	var logs bytes.Buffer
	cmd := exec.Command(bin, "-c", confPath)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("nats-server output:\n%s", logs.String())
		}
	})
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	// Wait until the server accepts a system-account connection: a
	// connection attempt is the readiness event.
	sys := filepath.Join(dir, "system.creds")
	require.NoError(t, k.WriteCreds(sys, natsauth.KindSystem, "system"))
	deadline := time.Now().Add(waitTimeout)
	for {
		nc, err := nats.Connect(url, nats.UserCredentials(sys), nats.Timeout(time.Second))
		if err == nil {
			nc.Close()
			return url
		}
		select {
		case <-done:
			t.Fatalf("nats-server exited: %s", logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server not ready: %v\n%s", err, logs.String())
		}
	}
}

type env struct {
	t    *testing.T
	url  string
	dir  string
	keys *natsauth.Keyring

	store        *store.Store
	dbURL        string
	coord        *coordinator.Coordinator
	coordNC      *nats.Conn // the coordinator's connection
	acme, globex *nats.Conn // tenants
	operator     *nats.Conn
	acmeClient   *events.Client
	globexClient *events.Client
	opClient     *events.Client

	started chan string // job ids whose handler began on w1
}

// connectAs issues a credential and connects with nothing but that file,
// as any stock NATS client would.
func (e *env) connectAs(kind, name string) *nats.Conn {
	e.t.Helper()
	path := filepath.Join(e.dir, kind+"-"+name+".creds")
	require.NoError(e.t, e.keys.WriteCreds(path, kind, name))
	nc, err := nats.Connect(e.url, nats.UserCredentials(path), nats.Name(kind+"-"+name))
	require.NoError(e.t, err)
	e.t.Cleanup(nc.Close)
	return nc
}

func setup(t *testing.T) *env { return setupWith(t) }

// setupWith is setup with executor accounts besides w1 and rogue.
func setupWith(t *testing.T, executors ...string) *env {
	t.Helper()
	dir := t.TempDir()
	k, err := natsauth.Open(filepath.Join(dir, "keys"), "fairway", true)
	require.NoError(t, err)
	for _, g := range []string{"acme", "globex"} {
		_, err := k.TenantAccountJWT(g)
		require.NoError(t, err)
	}
	for _, app := range append([]string{"w1", "rogue"}, executors...) {
		_, err := k.ExecutorAccountJWT(app)
		require.NoError(t, err)
	}
	e := &env{t: t, dir: dir, keys: k, started: make(chan string, 100)}
	e.url = startNATS(t, k, dir)
	ctx := t.Context()

	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, dbURL := storetest.OpenURL(t)
	e.store, e.dbURL = st, dbURL
	retries := 0
	e.coordNC = e.connectAs(natsauth.KindCoordinator, "c")
	coord, err := coordinator.New(storetest.Public(st), e.coordNC, coordinator.Config{
		RetryDelay: 20 * time.Millisecond, Retries: &retries, Logger: logger.With("component", "coordinator")})
	require.NoError(t, err)
	require.NoError(t, coord.Start(ctx))
	t.Cleanup(coord.Stop)
	e.coord = coord

	ex, err := executor.New(e.connectAs(natsauth.KindExecutor, "w1"), executor.Config{AppID: "w1", PoolSize: 4,
		WakeupPeriod: time.Hour, Heartbeat: time.Second, Logger: logger.With("component", "executor")})
	require.NoError(t, err)
	ex.Handle("echo", func(_ context.Context, job *executor.Job) error { return job.SetResult(job.Args) })
	ex.Handle("block", func(ctx context.Context, job *executor.Job) error {
		e.started <- job.ID
		<-ctx.Done()
		return ctx.Err()
	})
	require.NoError(t, ex.Start(ctx))
	t.Cleanup(ex.Stop)

	e.acme = e.connectAs(natsauth.KindTenant, "acme")
	e.globex = e.connectAs(natsauth.KindTenant, "globex")
	e.operator = e.connectAs(natsauth.KindOperator, "op")
	for _, nc := range []*nats.Conn{e.acme, e.globex} {
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		require.NoError(t, events.EnsureTenantStream(ctx, js, events.NewSubjects(""), 0, 0))
	}
	// Each tenant's submit stream, in the coordinators' account, as
	// 'fairway creds add tenant' makes it.
	ojs, err := jetstream.New(e.operator)
	require.NoError(t, err)
	for _, g := range []string{"acme", "globex"} {
		require.NoError(t, events.EnsureTenantSubmitStream(ctx, ojs, events.NewSubjects(""), g, events.StreamOptions{}))
	}
	// And the other executors' results streams, as 'fairway creds add
	// executor' makes them (w1's was made when it registered, as for an
	// executor provisioned before: TestResultsFloodFromANarrowExecutor…
	// checks it).
	for _, app := range append([]string{"rogue"}, executors...) {
		require.NoError(t, events.EnsureExecutorResultStream(ctx, ojs, events.NewSubjects(""), app, events.StreamOptions{}))
	}
	e.acmeClient = newClient(t, e.acme)
	e.globexClient = newClient(t, e.globex)
	e.opClient = newClient(t, e.operator)
	return e
}

func newClient(t *testing.T, nc *nats.Conn) *events.Client {
	c, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	return c
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// recorder collects every message a connection receives on its
// subscriptions.
type recorder struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func (r *recorder) add(m *nats.Msg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
}

// leaks returns the messages that mention any of needles.
func (r *recorder) leaks(needles ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.msgs {
		for _, n := range needles {
			if strings.Contains(string(m.Data), n) || strings.Contains(m.Subject, n) || strings.Contains(m.Reply, n) {
				out = append(out, m.Subject+" "+string(m.Data))
			}
		}
	}
	return out
}

// eventsOf follows a tenant's events (its own stream) into a channel.
func eventsOf(t *testing.T, c *events.Client) <-chan events.Event {
	ch := make(chan events.Event, 1000)
	sub, err := c.Subscribe(t.Context(), events.Filter{}, func(ev events.Event) { ch <- ev })
	require.NoError(t, err)
	t.Cleanup(sub.Stop)
	return ch
}

func waitEvent(t *testing.T, ch <-chan events.Event, what string, match func(events.Event) bool) events.Event {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case ev := <-ch:
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no event: %s", what)
		}
	}
}

func TestTenantCannotSeeOrTouchAnotherTenant(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	const secret = "acme-secret-args-7f3a"

	// While acme works, globex listens to everything its credential lets
	// it subscribe to.
	var heard recorder
	var spies []*nats.Subscription
	for _, subject := range []string{">", "_INBOX.>", "$JS.>", "fairway.>"} {
		sub, err := e.globex.Subscribe(subject, heard.add)
		require.NoError(t, err, subject)
		spies = append(spies, sub)
	}
	require.NoError(t, e.globex.Flush())
	acmeEvents := eventsOf(t, e.acmeClient)
	globexEvents := eventsOf(t, e.globexClient)

	// acme works: a job through the API, one asynchronously, one that runs
	// until it is cancelled.
	job, err := e.acmeClient.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo", ID: "shared-id",
		Args: json.RawMessage(`{"secret":"` + secret + `"}`), Tracker: "shared-tracker"})
	require.NoError(t, err)
	waitEvent(t, acmeEvents, "acme's job succeeds", func(ev events.Event) bool { return ev.JobID == job.ID && ev.State == fairway.StateSuccess })
	asyncID, err := e.acmeClient.Submit(ctx, fairway.Submission{Group: "acme", Task: "echo", Args: json.RawMessage(`{"secret":"` + secret + `"}`)})
	require.NoError(t, err)
	waitEvent(t, acmeEvents, "acme's async job succeeds", func(ev events.Event) bool { return ev.JobID == asyncID && ev.State == fairway.StateSuccess })
	blocked, err := e.acmeClient.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "block", Args: json.RawMessage(`{"secret":"` + secret + `"}`)})
	require.NoError(t, err)
	select {
	case id := <-e.started:
		require.Equal(t, blocked.ID, id)
	case <-time.After(waitTimeout):
		t.Fatal("acme's blocking job did not start")
	}
	waitEvent(t, acmeEvents, "acme's job runs", func(ev events.Event) bool { return ev.JobID == blocked.ID && ev.State == fairway.StateRunning })
	require.NoError(t, e.globex.Flush())
	require.Empty(t, heard.leaks(secret, "acme", job.ID, blocked.ID, asyncID), "globex heard about acme's jobs")
	for _, sub := range spies {
		require.NoError(t, sub.Unsubscribe())
	}

	t.Run("publishes to acme's subjects and Fairway's internals reach nothing", func(t *testing.T) {
		for _, subject := range []string{"fairway.api.acme.get", "fairway.api.acme.cancel", "fairway.admin.cancel", "fairway.admin.list",
			"fairway.exec.w1.dispatch", "fairway.exec.w1.register", "fairway.exec.globex.dispatch",
			"fairway.api.acme.graph", "fairway.api.acme.workflow", "fairway.admin.graph", "fairway.admin.limits", "fairway.admin.limit-set"} {
			body, _ := json.Marshal(map[string]any{"id": blocked.ID, "group": "acme"})
			_, err := e.globex.Request(subject, body, 500*time.Millisecond)
			require.ErrorIs(t, err, nats.ErrNoResponders, "globex got an answer on %s", subject)
		}
		js, err := jetstream.New(e.globex)
		require.NoError(t, err)
		for _, subject := range []string{"fairway.submit.acme.echo", "fairway.results.w1"} {
			_, err := js.Publish(ctx, subject, []byte(`{}`))
			require.ErrorIs(t, err, jetstream.ErrNoStreamResponse, "globex's publish to %s was stored", subject)
		}
		cancel, _ := json.Marshal(events.CancelCommand{JobID: blocked.ID, Attempt: blocked.Attempt})
		require.NoError(t, e.globex.Publish("fairway.executor.w1.cancel", cancel))
		require.NoError(t, e.globex.Publish("fairway.executor.w1.cancel", []byte(`{"job_id":"`+blocked.ID+`","attempt":0}`)))
	})

	t.Run("JetStream API shows globex only its own stream", func(t *testing.T) {
		js, err := jetstream.New(e.globex)
		require.NoError(t, err)
		var names []string
		lister := js.StreamNames(ctx)
		for n := range lister.Name() {
			names = append(names, n)
		}
		require.NoError(t, lister.Err())
		require.Equal(t, []string{"FAIRWAY_EVENTS"}, names)
		for _, stream := range []string{"FAIRWAY_SUBMIT", "FAIRWAY_RESULTS"} {
			_, err := js.Stream(ctx, stream)
			require.ErrorIs(t, err, jetstream.ErrStreamNotFound, stream)
		}
		// A durable consumer of acme's (on acme's own stream) is out of
		// reach: globex's FAIRWAY_EVENTS is another stream of the same name.
		ajs, err := jetstream.New(e.acme)
		require.NoError(t, err)
		_, err = ajs.CreateOrUpdateConsumer(ctx, "FAIRWAY_EVENTS", jetstream.ConsumerConfig{Durable: "acme-durable", AckPolicy: jetstream.AckExplicitPolicy})
		require.NoError(t, err)
		_, err = js.Consumer(ctx, "FAIRWAY_EVENTS", "acme-durable")
		require.ErrorIs(t, err, jetstream.ErrConsumerNotFound)
		// Re-creating it with its own filter makes a consumer in globex's
		// account, which reads globex's events only.
		cons, err := js.CreateOrUpdateConsumer(ctx, "FAIRWAY_EVENTS", jetstream.ConsumerConfig{Durable: "acme-durable", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "fairway.events.acme.>"})
		require.NoError(t, err)
		batch, err := cons.Fetch(10, jetstream.FetchMaxWait(300*time.Millisecond))
		require.NoError(t, err)
		for m := range batch.Messages() {
			t.Errorf("globex read acme's event %s: %s", m.Subject(), m.Data())
		}
		info, err := ajs.Consumer(ctx, "FAIRWAY_EVENTS", "acme-durable")
		require.NoError(t, err)
		require.Empty(t, info.CachedInfo().Config.FilterSubject, "globex changed acme's consumer")
	})

	t.Run("a push consumer cannot deliver into the executor's cancel subject", func(t *testing.T) {
		js, err := jetstream.New(e.globex)
		require.NoError(t, err)
		_, err = js.CreateOrUpdateConsumer(ctx, "FAIRWAY_EVENTS", jetstream.ConsumerConfig{
			Durable: "push-to-executor", DeliverSubject: "fairway.executor.w1.cancel", AckPolicy: jetstream.AckNonePolicy})
		if err == nil {
			// Allowed in its own account, where the subject reaches no executor.
			t.Log("globex created a push consumer delivering to fairway.executor.w1.cancel in its own account")
		}
		// A rejected submission naming acme's running job: an event with
		// attempt 0 about that id, in globex's stream.
		// (Sent as raw JSON: the Go client would refuse it before sending.)
		msg, err := e.globex.Request("fairway.api.globex.submit", []byte(`{"task":"echo","id":"`+blocked.ID+`","priority":"urgent"}`), waitTimeout)
		require.NoError(t, err)
		var reply events.Reply
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
		require.NotNil(t, reply.Error)
		require.Equal(t, "priority", reply.Error.Field)
		waitEvent(t, globexEvents, "globex's rejection", func(ev events.Event) bool { return ev.State == "rejected" })
	})

	t.Run("ids, trackers and Nats-Msg-Id are globex's own", func(t *testing.T) {
		// The same id and tracker as acme's job: globex gets a job of its own.
		got, err := e.globexClient.SubmitWait(ctx, fairway.Submission{Group: "globex", Task: "echo", ID: job.ID, Tracker: "shared-tracker", Args: json.RawMessage(`{}`)})
		require.NoError(t, err, "globex was refused an id or tracker that only acme uses")
		require.Equal(t, "globex", got.Group)
		require.NotContains(t, string(got.Args), secret)
		_, err = e.globexClient.Get(ctx, "globex", blocked.ID)
		require.ErrorIs(t, err, fairway.ErrNotFound)
		_, err = e.globexClient.Cancel(ctx, "globex", blocked.ID)
		require.ErrorIs(t, err, fairway.ErrNotFound)
		// globex and acme publish under the same Nats-Msg-Id at once:
		// each tenant's submissions are in a stream of its own, with its
		// own duplicate window, so neither is dropped as the other's
		// duplicate; acme's becomes acme's job of that id, and globex's
		// stays globex's.
		publish := func(nc *nats.Conn, group string) jetstream.PubAckFuture {
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			msg := &nats.Msg{Subject: "fairway.submit." + group + ".echo", Header: nats.Header{}, Data: []byte(`{"args":{"from":"` + group + `"}}`)}
			msg.Header.Set(jetstream.MsgIDHeader, "acme-msg-1")
			f, err := js.PublishMsgAsync(msg)
			require.NoError(t, err)
			return f
		}
		for _, f := range []jetstream.PubAckFuture{publish(e.globex, "globex"), publish(e.acme, "acme")} {
			select {
			case ack := <-f.Ok():
				require.False(t, ack.Duplicate, "a submission was dropped as another tenant's duplicate")
			case err := <-f.Err():
				t.Fatal(err)
			}
		}
		waitEvent(t, acmeEvents, "acme's job acme-msg-1 succeeds", func(ev events.Event) bool { return ev.JobID == "acme-msg-1" && ev.State == fairway.StateSuccess })
		mine, err := e.acmeClient.Get(ctx, "acme", "acme-msg-1")
		require.NoError(t, err)
		require.JSONEq(t, `{"from":"acme"}`, string(mine.Args))
		waitEvent(t, globexEvents, "globex's job acme-msg-1 succeeds", func(ev events.Event) bool { return ev.JobID == "acme-msg-1" && ev.State == fairway.StateSuccess })
	})

	t.Run("dependencies and graphs stay in globex's group", func(t *testing.T) {
		// Naming acme's job as a dependency: unknown in globex's group, as
		// any id globex never stored (nothing tells it acme has one).
		for _, id := range []string{blocked.ID, "no-such-job"} {
			_, err := e.globexClient.SubmitWait(ctx, fairway.Submission{Group: "globex", Task: "echo", DependsOn: []string{id}})
			require.ErrorIs(t, err, fairway.ErrInvalid)
			require.Equal(t, "job "+id+" does not exist in group globex: a job can depend only on jobs stored before it (or, in a workflow, on another job of the workflow)", fairway.AsError(err).Message)
		}
		_, err := e.globexClient.SubmitWorkflow(ctx, "globex", fairway.Workflow{Jobs: []fairway.WorkflowJob{
			{Ref: "a", Submission: fairway.Submission{Task: "echo", DependsOn: []string{blocked.ID}}}}})
		require.ErrorIs(t, err, fairway.ErrInvalid)
		_, err = e.globexClient.Graph(ctx, "globex", blocked.ID)
		require.ErrorIs(t, err, fairway.ErrNotFound)
		// globex's own job of acme's id (made above) has a graph of one:
		// its own.
		graph, err := e.globexClient.Graph(ctx, "globex", job.ID)
		require.NoError(t, err)
		require.Len(t, graph, 1)
		require.Equal(t, "globex", graph[0].Group)
		_, err = e.globexClient.SetLimit(ctx, "group", "acme", 0)
		require.ErrorContains(t, err, "no coordinator answered on fairway.admin.limit-set", "a tenant cannot set limits")
	})

	t.Run("a rogue executor cannot act for w1", func(t *testing.T) {
		rogue := e.connectAs(natsauth.KindExecutor, "rogue")
		// Register as w1 through its own subject: refused.
		reg, _ := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{AppID: "w1", Instance: "rogue", Slots: 1, Tasks: []string{"block"}}})
		msg, err := rogue.Request("fairway.exec.rogue.register", reg, waitTimeout)
		require.NoError(t, err)
		var reply events.Reply
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
		require.NotNil(t, reply.Error, "rogue registered as w1")
		// Report acme's running job done, as w1, on its own subject and on w1's.
		js, err := jetstream.New(rogue)
		require.NoError(t, err)
		forged, _ := json.Marshal([]events.Report{{Type: events.ReportDone, JobID: blocked.ID, Attempt: blocked.Attempt + 1, Executor: "w1",
			Outcome: events.OutcomeSuccess, Result: json.RawMessage(`{"forged":true}`), Time: time.Now()}})
		_, err = js.Publish(ctx, "fairway.results.rogue", forged)
		require.NoError(t, err)
		_, err = js.Publish(ctx, "fairway.results.w1", forged)
		require.ErrorIs(t, err, jetstream.ErrNoStreamResponse)
		_, err = rogue.Request("fairway.exec.w1.dispatch", []byte(`{}`), 500*time.Millisecond)
		require.ErrorIs(t, err, nats.ErrNoResponders)

		// acme cancels its own job: only now does it end, cancelled, and
		// the rogue executor, listening to all it can, hears nothing of it.
		var rogueHeard recorder
		for _, subject := range []string{">", "fairway.executor.w1.>", "_INBOX.>"} {
			_, err := rogue.Subscribe(subject, rogueHeard.add)
			require.NoError(t, err)
		}
		require.NoError(t, rogue.Flush())
		got, err := e.acmeClient.Get(ctx, "acme", blocked.ID)
		require.NoError(t, err)
		require.Equal(t, fairway.StateRunning, got.State, "acme's running job was touched")
		require.Empty(t, got.Result)
		_, err = e.acmeClient.Cancel(ctx, "acme", blocked.ID)
		require.NoError(t, err)
		ev := waitEvent(t, acmeEvents, "acme's job cancelled", func(ev events.Event) bool { return ev.JobID == blocked.ID && ev.State.Final() })
		require.Equal(t, fairway.StateCancelled, ev.State)
		require.NoError(t, rogue.Flush())
		require.Empty(t, rogueHeard.leaks(secret, blocked.ID, "acme"), "the rogue executor heard about acme's jobs")
	})

	t.Run("a second executor with w1's credential is refused while w1 lives", func(t *testing.T) {
		// Executors answer the coordinators' ping through their own
		// account, so a duplicate app-id is detected.
		twin, err := executor.New(e.connectAs(natsauth.KindExecutor, "w1"), executor.Config{AppID: "w1", PoolSize: 1, WakeupPeriod: time.Hour})
		require.NoError(t, err)
		twin.Handle("block", func(context.Context, *executor.Job) error { return nil })
		err = twin.Start(ctx)
		require.Error(t, err)
		require.Contains(t, err.Error(), `app-id "w1" is already in use`)
	})

	// globex's own copy of events holds its group's only.
	for {
		select {
		case ev := <-globexEvents:
			require.Equal(t, "globex", ev.Group, "globex's event stream holds another group's event: %+v", ev)
			continue
		default:
		}
		return
	}
}

// TestTenantBurstIsStoredWholeAndDelaysNoOtherTenant: acme publishes a
// burst of 100,000 submissions, each a message of its own as a client in
// any language may, far more than a coordinator reads ahead; with the
// default settings every one of them is stored (none refused for a rate),
// and globex's submissions, made while acme's burst is still waiting in
// NATS, are stored before it has all been: globex's submissions are read
// on their own, not behind acme's backlog.
func TestTenantBurstIsStoredWholeAndDelaysNoOtherTenant(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	const burst, few = 100_000, 10
	globexEvents := eventsOf(t, e.globexClient)
	js, err := jetstream.New(e.acme)
	require.NoError(t, err)
	published := make(chan error, 1)
	go func() {
		var futures []jetstream.PubAckFuture
		wait := func() error {
			for _, f := range futures {
				select {
				case ack := <-f.Ok():
					if ack.Duplicate {
						return fmt.Errorf("a submission was acknowledged as a duplicate")
					}
				case err := <-f.Err():
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			futures = futures[:0]
			return nil
		}
		for i := range burst {
			f, err := js.PublishAsync("fairway.submit.acme.echo", []byte(`{"id":"burst-`+strconv.Itoa(i)+`","pending":true}`))
			if err != nil {
				published <- err
				return
			}
			if futures = append(futures, f); len(futures) == 1000 {
				if err := wait(); err != nil {
					published <- err
					return
				}
			}
		}
		published <- wait()
	}()
	acmeStored := func() int {
		// The operators' view of unfinished jobs, on either engine.
		var n int
		require.NoError(t, e.store.Pool().QueryRow(ctx, `SELECT count(*) FROM fairway_live WHERE group_name = 'acme'`).Scan(&n))
		return n
	}
	// Once acme's burst is being stored, globex submits.
	require.Eventually(t, func() bool { return acmeStored() > 0 }, waitTimeout, 5*time.Millisecond)
	submitted := map[string]time.Time{}
	for i := range few {
		id := "globex-" + strconv.Itoa(i)
		submitted[id] = time.Now()
		_, err := e.globexClient.Submit(ctx, fairway.Submission{ID: id, Group: "globex", Task: "echo", Pending: true})
		require.NoError(t, err)
	}
	var waits []time.Duration
	for len(waits) < few {
		ev := waitEvent(t, globexEvents, "globex's submissions are stored", func(ev events.Event) bool {
			_, ok := submitted[ev.JobID]
			return ok && ev.State == fairway.StatePending
		})
		waits = append(waits, ev.Time.Sub(submitted[ev.JobID]))
		delete(submitted, ev.JobID)
	}
	behind := acmeStored()
	t.Logf("globex's submissions were stored after %v; %d of acme's %d were stored by then", waits, behind, burst)
	require.Less(t, behind, burst, "globex's submissions waited for acme's whole burst")

	require.NoError(t, <-published)
	require.Eventually(t, func() bool { return acmeStored() == burst }, 5*time.Minute, 50*time.Millisecond,
		"every submission of acme's burst is stored, none refused")
}

// TestRogueExecutorGetsNoJobItDidNotRegister: an executor credential is
// bounded by its registration. Asking for jobs without registering (no
// instance, or one never registered) gets an error and no job; after
// registering task echo only, asking for task block gets none of globex's
// block jobs waiting, whatever the request names.
func TestRogueExecutorGetsNoJobItDidNotRegister(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	globexEvents := eventsOf(t, e.globexClient)
	const n = 30 // more than w1 holds (4 slots and 4 held): most wait
	var subs []fairway.Submission
	for range n {
		subs = append(subs, fairway.Submission{Group: "globex", Task: "block", Args: json.RawMessage(`{"secret":"globex-args"}`)})
	}
	_, err := e.globexClient.SubmitMany(ctx, subs)
	require.NoError(t, err)
	for stored := 0; stored < n; stored++ {
		waitEvent(t, globexEvents, "globex's jobs are stored", func(ev events.Event) bool { return ev.State == fairway.StateWaiting })
	}

	rogue := e.connectAs(natsauth.KindExecutor, "rogue")
	ask := func(body string) events.DispatchReply {
		msg, err := rogue.Request("fairway.exec.rogue.dispatch", []byte(body), waitTimeout)
		require.NoError(t, err)
		var reply events.DispatchReply
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
		return reply
	}
	r := ask(`{"executor":"rogue","slots":100000,"tasks":["block"]}`)
	require.NotNil(t, r.Error, "a dispatch without an instance")
	require.Empty(t, r.Jobs, "a credential that never registered got jobs")
	r = ask(`{"executor":"rogue","instance":"made-up","slots":100000,"tasks":["block"]}`)
	require.NotNil(t, r.Error, "a dispatch under an instance never registered")
	require.Empty(t, r.Jobs)

	reg, _ := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{AppID: "rogue", Instance: "r1", Slots: 1, Tasks: []string{"echo"}}})
	msg, err := rogue.Request("fairway.exec.rogue.register", reg, waitTimeout)
	require.NoError(t, err)
	var reply events.Reply
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	require.Nil(t, reply.Error)
	r = ask(`{"executor":"rogue","instance":"r1","slots":100000,"tasks":["block"]}`)
	require.Nil(t, r.Error)
	require.Empty(t, r.Jobs, "rogue got jobs of a task it did not register")
}

// TestExecutorFloodStopsNoOtherExecutor: a rogue executor credential floods
// the executor protocol with heartbeats and dispatch requests (its own
// subjects, as its credential may); w1's heartbeats are still recorded on
// time, acme's job still runs on w1, and a dispatch of w1's is answered:
// each executor's messages wait behind its own only.
func TestExecutorFloodStopsNoOtherExecutor(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	rogue := e.connectAs(natsauth.KindExecutor, "rogue")
	acmeEvents := eventsOf(t, e.acmeClient)
	blocked, err := e.acmeClient.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "block"})
	require.NoError(t, err)
	select {
	case id := <-e.started:
		require.Equal(t, blocked.ID, id)
	case <-time.After(waitTimeout):
		t.Fatal("acme's job did not start")
	}

	const flood = 100_000
	hb := []byte(`{"executor":"rogue","instance":"r","jobs":[]}`)
	dispatch := []byte(`{"executor":"rogue","instance":"r","slots":100000,"tasks":["block","echo"]}`)
	for i := range flood {
		require.NoError(t, rogue.Publish("fairway.exec.rogue.heartbeat", hb))
		if i%10 == 0 {
			require.NoError(t, rogue.PublishRequest("fairway.exec.rogue.dispatch", "_INBOX.rogue", dispatch))
		}
	}
	require.NoError(t, rogue.Flush())
	floodEnd := time.Now()

	// w1 heartbeats every second: one sent after the flood is recorded
	// promptly, not behind 100,000 of rogue's.
	require.Eventually(t, func() bool {
		executors, err := e.opClient.Executors(ctx)
		require.NoError(t, err)
		for _, x := range executors {
			if x.AppID == "w1" && x.LastHeartbeat.After(floodEnd) {
				return true
			}
		}
		return false
	}, 5*time.Second, 50*time.Millisecond, "w1's heartbeats waited behind the rogue's")
	got, err := e.acmeClient.Get(ctx, "acme", blocked.ID)
	require.NoError(t, err)
	require.Equal(t, fairway.StateRunning, got.State, "acme's job was lost during the flood")
	require.Equal(t, 1, got.Attempt)
	// And w1 still gets work: a job submitted now runs.
	job, err := e.acmeClient.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo", Args: json.RawMessage(`{}`)})
	require.NoError(t, err)
	waitEvent(t, acmeEvents, "acme's job after the flood succeeds", func(ev events.Event) bool { return ev.JobID == job.ID && ev.State == fairway.StateSuccess })
}
