package coordinator

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"
)

// dispatcherHarness is a dispatcher on its own PostgreSQL and NATS server,
// started, with a journal engine that leads the partition: its
// subscriptions and its parking loop run until the test ends, and stop as
// Coordinator.Stop stops them (subscriptions drained, then the loop).
type dispatcherHarness struct {
	st       *store.Store
	e        *journalEngine
	nc       *nats.Conn
	subjects events.Subjects
	f        *followUps
	d        *dispatcher
}

func newDispatcherHarness(t *testing.T, cfg dispatchConfig) *dispatcherHarness {
	t.Helper()
	return newDispatcherHarnessPolling(t, cfg, 0)
}

// newDispatcherHarnessPolling is newDispatcherHarness with a journal
// leader that reads the tail unwoken every poll (0: the default).
func newDispatcherHarnessPolling(t *testing.T, cfg dispatchConfig, poll time.Duration) *dispatcherHarness {
	t.Helper()
	st := storetest.Open(t)
	_, nc := natstest.Start(t)
	subjects := events.NewSubjects("")
	log := serviceLogger(t)
	f := newFollowUps()
	// The request/reply API's replies, as the Coordinator codes them,
	// less its request ids.
	respond := func(msg *nats.Msg, reply events.Reply, err error) {
		if err != nil {
			reply = events.Reply{Error: fairway.AsError(err)}
		}
		data, _ := json.Marshal(reply)
		_ = msg.Respond(data)
	}
	replyError := func(_ string, err error) *fairway.Error { return fairway.AsError(err) }
	d := newDispatcher(cfg, serviceBase{store: st, log: log, metrics: newMetrics(prometheus.NewRegistry(), st, log), tracer: noop.NewTracerProvider().Tracer(""), nc: nc, subjects: subjects},
		&taskCache{store: st, log: log}, respond, replyError)
	ctx, cancel := context.WithCancel(context.Background())
	subs := &subscriptions{nc: nc}
	var wg sync.WaitGroup
	goLoop := func(ctx context.Context, loop func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx)
		}()
	}
	t.Cleanup(func() {
		subs.drain()
		cancel()
		wg.Wait()
	})
	require.NoError(t, d.start(ctx, subs, goLoop))
	require.Len(t, subs.subs, 4, "register, deregister, work notifications, heartbeat (dispatch: while leading)")
	d.parts = partitions{startJournalPolling(t, st, f, d.serveDispatch, poll)}
	runService(t, d.parkLoop)
	return &dispatcherHarness{st: st, e: d.parts[0], nc: nc, subjects: subjects, f: f, d: d}
}

// request sends an executor protocol request under app-id appID and
// decodes the reply into reply.
func (h *dispatcherHarness) request(t *testing.T, appID, verb string, req, reply any) {
	t.Helper()
	data, err := json.Marshal(req)
	require.NoError(t, err)
	msg, err := h.nc.Request(h.subjects.Exec(appID, verb), data, serviceWait)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(msg.Data, reply))
}

// parkRequest registers executor "w" (task "t", one slot) and sends a
// dispatch request that waits parked, there being no job; its reply
// comes on the channel returned.
func parkRequest(t *testing.T, h *dispatcherHarness) chan *nats.Msg {
	t.Helper()
	var reg events.Reply
	h.request(t, "w", events.ExecRegister, events.RegisterRequest{Executor: fairway.Executor{AppID: "w", Instance: "i1", Host: "h",
		Slots: 1, Tasks: []string{"t"}}}, &reg)
	require.Nil(t, reg.Error)
	replies := make(chan *nats.Msg, 1)
	data, err := json.Marshal(events.DispatchRequest{Executor: "w", Instance: "i1", Slots: 1, Tasks: []string{"t"},
		WaitMS: int(maxParkWait / time.Millisecond), RequestID: fairway.NewID()})
	require.NoError(t, err)
	inbox := nats.NewInbox()
	sub, err := h.nc.ChanSubscribe(inbox, replies)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, h.nc.PublishRequest(h.subjects.Exec("w", events.ExecDispatch), inbox, data))
	require.Eventually(t, func() bool { return h.d.parking.len() == 1 }, serviceWait, time.Millisecond, "no job: the request waits")
	return replies
}

// TestALeaderReadsTheJournalWhenAnotherCoordinatorStores: a job stored
// by another coordinator (its ingest, behind this leader's back) is read
// by the leader when that coordinator's work notification comes, not at
// its next unwoken read of the journal (here an hour away, renewals too;
// by default up to 50 ms): the parked request gets it.
func TestALeaderReadsTheJournalWhenAnotherCoordinatorStores(t *testing.T) {
	t.Parallel()
	h := newDispatcherHarnessPolling(t, dispatchConfig{}, time.Hour)
	replies := parkRequest(t, h)
	sub := fairway.Submission{Group: "g", ID: "j1", Task: "t"}
	require.NoError(t, sub.Normalize("", "", fairway.DefaultMaxArgsSize, 3))
	require.NoError(t, journal.SubmitFresh(t.Context(), h.e.db, h.e.partition, itemsOf([]fairway.Submission{sub})))
	require.NoError(t, h.nc.Publish(h.subjects.NotifyWork(), []byte("another coordinator")))
	select {
	case msg := <-replies:
		var reply events.DispatchReply
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
		require.Nil(t, reply.Error)
		require.Len(t, reply.Jobs, 1, "answered empty at its deadline: the leader did not read what another coordinator stored")
		require.Equal(t, "j1", reply.Jobs[0].ID)
	case <-time.After(serviceWait):
		t.Fatal("the parked request got no answer")
	}
}

// TestDispatcherParksARequestUntilWorkArrives runs the dispatcher alone:
// an executor registers (the task cache learns its task), asks for work
// when there is none and waits parked; a job is stored and another
// coordinator's work notification comes: the parked request is answered
// with the job, claimed for the executor.
func TestDispatcherParksARequestUntilWorkArrives(t *testing.T) {
	t.Parallel()
	h := newDispatcherHarness(t, dispatchConfig{})
	require.Equal(t, LeaseDefault, h.d.cfg.Lease)
	require.Equal(t, fairway.CountingScheme{High: 4, Low: 1}, h.d.cfg.Scheme)

	replies := parkRequest(t, h)
	_, err := h.d.tasks.lookup("t", time.Time{})
	require.NoError(t, err, "registration refreshes the task cache")
	_, err = h.d.tasks.lookup("other", time.Time{})
	require.ErrorContains(t, err, `unknown task "other"`)

	storeJobs(t, h.e, fairway.Submission{Group: "g", ID: "j1"})
	require.NoError(t, h.nc.Publish(h.subjects.NotifyWork(), []byte("another coordinator")))
	var reply events.DispatchReply
	select {
	case msg := <-replies:
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
	case <-time.After(serviceWait):
		t.Fatal("the parked request got no answer")
	}
	require.Nil(t, reply.Error)
	require.Len(t, reply.Jobs, 1)
	require.Equal(t, "j1", reply.Jobs[0].ID)
	require.Equal(t, "w", reply.Jobs[0].Executor)
	require.Equal(t, fairway.StateScheduled, jobState(t, h.e, "g", "j1"))
	require.Zero(t, h.d.parking.len())
	require.Eventually(t, func() bool { return h.f.state("j1") == fairway.StateScheduled }, serviceWait, 5*time.Millisecond, "the claim's event is published")
}

// TestDispatcherNotifiesWorkUnderItsName: notifyWork serves this
// dispatcher's parked requests at once (a signal of its parking) and
// tells the other coordinators, under its name, so that it can tell its
// own notification from theirs when it hears it back.
func TestDispatcherNotifiesWorkUnderItsName(t *testing.T) {
	t.Parallel()
	h, notes := notesHarness(t)
	gen := h.d.parking.generation()
	h.d.notifyWork()
	require.Equal(t, gen+1, h.d.parking.generation())
	requireNote(t, h, notes)
}

// notesHarness is a dispatcher's harness and a subscription to the work
// notifications.
func notesHarness(t *testing.T) (*dispatcherHarness, *nats.Subscription) {
	h := newDispatcherHarness(t, dispatchConfig{})
	notes, err := h.nc.SubscribeSync(h.subjects.NotifyWork())
	require.NoError(t, err)
	require.NoError(t, h.nc.Flush())
	return h, notes
}

// requireNote waits for a work notification of h's dispatcher.
func requireNote(t *testing.T, h *dispatcherHarness, notes *nats.Subscription) {
	msg, err := notes.NextMsg(serviceWait)
	require.NoError(t, err)
	require.Equal(t, h.d.notifyID, msg.Data)
}

// TestDispatcherSpacesItsWorkNotifications: a burst of notifyWork calls
// (jobs that came and ended) signals the parking every time, but
// publishes one notification at once and one at the end of notifyEvery,
// not one a call: every executor hears each.
func TestDispatcherSpacesItsWorkNotifications(t *testing.T) {
	t.Parallel()
	h, notes := notesHarness(t)
	gen := h.d.parking.generation()
	for range 100 {
		h.d.notifyWork()
	}
	require.Equal(t, gen+100, h.d.parking.generation(), "its own parked requests are served at every call")
	for range 2 { // the first call's, then the rest's at the period's end
		requireNote(t, h, notes)
	}
	// A call after the trailing one's period is published again: the
	// limit spaces the notifications, it does not stop them.
	require.Eventually(t, func() bool {
		h.d.notifyWork()
		_, err := notes.NextMsg(time.Millisecond)
		return err == nil
	}, serviceWait, notifyEvery/5)
	n, _, err := notes.Pending()
	require.NoError(t, err)
	require.LessOrEqual(t, n, 1, "at most the trailing notification of the calls above is still on its way")
}

func TestTrailingLimitRunsOnceAtOnceAndOnceAtTheEnd(t *testing.T) {
	t.Parallel()
	var l trailingLimit
	runs := make(chan time.Time, 10)
	start := time.Now()
	for range 5 {
		l.do(time.Hour, func() { runs <- time.Now() })
	}
	require.Len(t, runs, 1, "the first at once; the others wait for the hour's end")
	// A period that has passed: the next call runs at once.
	var m trailingLimit
	m.do(time.Millisecond, func() { runs <- time.Now() })
	m.do(time.Millisecond, func() { runs <- time.Now() })
	m.do(time.Millisecond, func() { runs <- time.Now() })
	<-runs
	<-runs // m's first
	select {
	case at := <-runs: // m's trailing run, once for both calls
		require.GreaterOrEqual(t, at.Sub(start), time.Millisecond)
	case <-time.After(serviceWait):
		t.Fatal("the calls within the period were not run at its end")
	}
	require.Eventually(t, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return !m.pending
	}, serviceWait, time.Millisecond)
	require.Empty(t, runs, "two calls within the period ran once at its end")
}

// TestDispatcherRefusesAnExecutorSpeakingForAnother: an executor speaks
// only for itself, whatever its body says; the request is refused, and
// nothing is claimed.
func TestDispatcherRefusesAnExecutorSpeakingForAnother(t *testing.T) {
	t.Parallel()
	h := newDispatcherHarness(t, dispatchConfig{})
	storeJobs(t, h.e, fairway.Submission{Group: "g", ID: "j1"})
	var reply events.DispatchReply
	h.request(t, "mallory", events.ExecDispatch, events.DispatchRequest{Executor: "w", Instance: "i1", Slots: 1, Tasks: []string{"t"}}, &reply)
	require.NotNil(t, reply.Error)
	require.Equal(t, fairway.CodeInvalid, reply.Error.Code)
	require.Contains(t, reply.Error.Message, "an executor speaks only for itself")
	require.Equal(t, fairway.StateWaiting, jobState(t, h.e, "g", "j1"))
}
