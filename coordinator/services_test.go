package coordinator

// Helpers of the tests that run one service or maintenance type on its
// own, without a Coordinator: a real PostgreSQL (storetest; TestMain is in
// coordinator_test.go) and, for the services that use streams, an
// embedded NATS server (streamWorld).

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"
)

// serviceWait bounds every wait for a service to do its work.
const serviceWait = 20 * time.Second

// serviceLogger logs warnings and errors to the test's log.
func serviceLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(serviceLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type serviceLogWriter struct{ t *testing.T }

func (w serviceLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// runService runs a service's loop until the test ends, and waits for it
// to return before the test's other cleanups (the store's close) run.
func runService(t *testing.T, run func(context.Context)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// followUps records the follow-ups a service asks for, or the journal's
// leader makes: the events it publishes, and its kicks of the outbox and
// of the executors.
type followUps struct {
	mu      sync.Mutex
	events  []fairway.Event
	kicks   int
	notices chan struct{}
}

func newFollowUps() *followUps { return &followUps{notices: make(chan struct{}, 100)} }

// publish records the events the journal's leader publishes.
func (f *followUps) publish(_ context.Context, evs []fairway.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, evs...)
	return nil
}

func (f *followUps) kickOutbox() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kicks++
}

func (f *followUps) notifyWork() {
	select {
	case f.notices <- struct{}{}:
	default:
	}
}

// state is the state of the last event published for job id ("" if
// none).
func (f *followUps) state(id string) fairway.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s fairway.State
	for _, e := range f.events {
		if e.JobID == id {
			s = e.State
		}
	}
	return s
}

func (f *followUps) kicked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kicks
}

// startJournal runs a journal engine on st that leads the partition, as
// a coordinator's does, until the test ends: f gets the events its leader
// publishes and its wake-ups of the executors; serve, when set, is told
// when it leads (the dispatcher's serveDispatch).
func startJournal(t *testing.T, st *store.Store, f *followUps, serve func(bool)) *journalEngine {
	t.Helper()
	return startJournalPolling(t, st, f, serve, 0)
}

// startJournalPolling is startJournal with a leader that reads the
// journal's tail unwoken every poll, and renews its lease as often (0: the
// defaults).
func startJournalPolling(t *testing.T, st *store.Store, f *followUps, serve func(bool), poll time.Duration) *journalEngine {
	t.Helper()
	require.NoError(t, st.OpenJournal(t.Context()))
	e := newJournalEngine(st, st, journalEngineConfig{Holder: fairway.NewID(), Fairness: store.FairnessJobs,
		Scheme: fairway.CountingScheme{High: 4, Low: 1}, RetryDelay: time.Hour, Poll: poll, Renew: poll, TTL: 3 * poll}, serviceLogger(t), f.publish, f.notifyWork, serve)
	runService(t, e.run)
	require.Eventually(t, e.leads.Load, serviceWait, 5*time.Millisecond, "the journal engine leads the partition")
	return e
}

// storeJobs stores submissions of task "t" (normalized, 3 retries) in the
// journal, and returns them once its leader has folded them.
func storeJobs(t *testing.T, e *journalEngine, subs ...fairway.Submission) []fairway.Submission {
	t.Helper()
	for i := range subs {
		if subs[i].Task == "" {
			subs[i].Task = "t"
		}
		require.NoError(t, subs[i].Normalize("", "", fairway.DefaultMaxArgsSize, 3))
	}
	res, err := e.insert(t.Context(), subs)
	require.NoError(t, err)
	for _, r := range res {
		require.Nil(t, r.Err)
	}
	for _, s := range subs {
		require.Eventually(t, func() bool { return jobState(t, e, s.Group, s.ID) != "" }, serviceWait, 5*time.Millisecond, "job %s folded", s.ID)
	}
	return subs
}

// jobState reads a job's state (the leader's, or its record's): "" when
// there is none, the error's text when it cannot be read. It may run in
// require.Eventually's goroutine, where a test must not fail.
func jobState(t *testing.T, e *journalEngine, group, id string) fairway.State {
	job, err := e.get(t.Context(), group, id)
	switch {
	case errors.Is(err, fairway.ErrNotFound):
		return ""
	case err != nil:
		return fairway.State("error: " + err.Error())
	}
	return job.State
}

// readStream reads a stream's messages, in order, until it has n.
func readStream(t *testing.T, js jetstream.JetStream, stream string, n int) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), serviceWait)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	var msgs []jetstream.Msg
	for len(msgs) < n {
		msg, err := cons.Next(jetstream.FetchMaxWait(serviceWait))
		require.NoError(t, err, "got %d of %d messages", len(msgs), n)
		msgs = append(msgs, msg)
	}
	return msgs
}

// streamWorld is what a service that reads or writes streams runs on in
// its test: a store on a throwaway database, an embedded NATS server with
// Fairway's streams, and a logger to the test's log.
type streamWorld struct {
	st       *store.Store
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects events.Subjects
	log      *slog.Logger
}

// base is what w's services are built on (serviceBase), with metrics m.
func (w streamWorld) base(m *coordMetrics) serviceBase {
	return serviceBase{store: w.st, log: w.log, metrics: m, tracer: noop.NewTracerProvider().Tracer(""), nc: w.nc, js: w.js, subjects: w.subjects}
}

// storeBase is what a service that needs the store and a logger only is
// built on.
func storeBase(st *store.Store, log *slog.Logger) serviceBase {
	return serviceBase{store: st, log: log, tracer: noop.NewTracerProvider().Tracer("")}
}

func newStreamWorld(t *testing.T) streamWorld {
	t.Helper()
	st := storetest.Open(t)
	_, nc := natstest.Start(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	subjects := events.NewSubjects("")
	require.NoError(t, events.EnsureStreams(t.Context(), js, subjects, events.StreamOptions{}))
	return streamWorld{st: st, nc: nc, js: js, subjects: subjects, log: serviceLogger(t)}
}

// deadLetters is the dead-letter handling the coordinator gives its
// services, counting in metrics.
func (w streamWorld) deadLetters(metrics *coordMetrics) *deadLetters {
	return &deadLetters{after: DeadLetterAfterDefault, subjects: w.subjects, nc: w.nc, js: w.js, log: w.log, metrics: metrics}
}

// testConsumer is a durable consumer "test" on stream, for a test that
// hands a service the messages it fetches (fetch).
func testConsumer(t *testing.T, js jetstream.JetStream, stream string) jetstream.Consumer {
	t.Helper()
	cons, err := js.CreateOrUpdateConsumer(t.Context(), stream, jetstream.ConsumerConfig{Durable: "test", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	return cons
}

// fetch takes the next n messages of cons, waiting for each.
func fetch(t *testing.T, cons jetstream.Consumer, n int) []jetstream.Msg {
	t.Helper()
	var msgs []jetstream.Msg
	for len(msgs) < n {
		batch, err := cons.Fetch(n-len(msgs), jetstream.FetchMaxWait(serviceWait))
		require.NoError(t, err)
		for msg := range batch.Messages() {
			msgs = append(msgs, msg)
		}
		require.NoError(t, batch.Error())
	}
	return msgs
}

// requireAllAcked waits until cons has nothing pending nor unacknowledged.
func requireAllAcked(t *testing.T, cons jetstream.Consumer, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	}, serviceWait, 10*time.Millisecond, what)
}
