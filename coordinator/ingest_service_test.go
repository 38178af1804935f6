package coordinator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// ingestHarness is ingest on its own PostgreSQL and NATS server, with the
// streams created, not started, a journal engine that leads the
// partition, and what it hands on recorded.
type ingestHarness struct {
	st       *store.Store
	e        *journalEngine
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects events.Subjects
	parking  *parking
	f        *followUps
	ingest   *ingest

	handed    chan []fairway.Job  // what handedOver got
	handedFor chan *parkedRequest // and for which request
}

func newIngestHarness(t *testing.T, cfg ingestConfig) *ingestHarness {
	t.Helper()
	w := newStreamWorld(t)
	st, nc, js, subjects, log := w.st, w.nc, w.js, w.subjects, w.log
	metrics := newMetrics(prometheus.NewRegistry(), st, log)
	dead := w.deadLetters(metrics)
	h := &ingestHarness{st: st, nc: nc, js: js, subjects: subjects, parking: newParking(), f: newFollowUps(),
		handed: make(chan []fairway.Job, 1), handedFor: make(chan *parkedRequest, 1)}
	h.ingest = newIngest(cfg, w.base(metrics), dead,
		newQuotas(QuotaJobsDefault, QuotaSubmitRateDefault, QuotaSubmitBurstDefault, QuotaSubmitBytesRateDefault, QuotaSubmitBytesBurstDefault, metrics.quotaRefused),
		&taskCache{store: st, log: log}, h.parking,
		func(_ context.Context, r *parkedRequest, jobs []fairway.Job, _ time.Time) {
			h.handedFor <- r
			h.handed <- jobs
		},
		h.f.kickOutbox)
	h.e = startJournal(t, st, h.f, nil)
	h.ingest.parts = partitions{h.e}
	h.ingest.routes = h.e.leads.Load // the one coordinator: it leads its partition, and the cluster
	h.ingest.quotas.parts = partitions{h.e}
	return h
}

// publish publishes bodies to subject, each a message, as any client
// could.
func (h *ingestHarness) publish(t *testing.T, subject string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		_, err := h.js.Publish(t.Context(), subject, []byte(b))
		require.NoError(t, err)
	}
}

// startServices returns consumers whose loops run until the test ends,
// stopped as Coordinator.Stop stops them: drained, then the loops
// cancelled and waited for, before the test's other cleanups run; and the
// subscriptions, drained first as Coordinator.Stop drains them.
func startServices(t *testing.T, js jetstream.JetStream, nc *nats.Conn) (context.Context, *consumers, *subscriptions) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	cs := &consumers{js: js, nc: nc, goLoop: func(ctx context.Context, loop func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx)
		}()
	}}
	subs := &subscriptions{nc: nc}
	t.Cleanup(func() {
		subs.drain()
		cs.drain()
		cancel()
		wg.Wait()
	})
	return ctx, cs, subs
}

// TestIngestStoresTheSubmitStream runs ingest alone on its durable
// consumer: the submissions of a message of two and of a message of one
// are stored, one that is invalid is refused (no job), every follow-up is
// asked for, and every message is acknowledged once stored.
func TestIngestStoresTheSubmitStream(t *testing.T) {
	t.Parallel()
	// No sweep but the first: what is published later comes by its
	// announcement.
	h := newIngestHarness(t, ingestConfig{Retries: 3, SweepEvery: time.Hour})
	require.Equal(t, IngestBatchDefault, h.ingest.cfg.Batch)
	require.Equal(t, 2*IngestBatchDefault, h.ingest.cfg.Window, "two batches per group")
	// Published before ingest starts: its first sweep finds them.
	h.publish(t, h.subjects.Submit("a", "t"), `[{"id":"a1","args":{}},{"id":"a2","args":{"n":2}}]`)
	h.publish(t, h.subjects.Submit("b", "t"), `{"id":"b1","args":{}}`, `{"id":"b2","priority":"urgent"}`)

	ctx, cs, subs := startServices(t, h.js, h.nc)
	require.NoError(t, h.ingest.start(ctx, subs, cs))
	require.Len(t, cs.stoppers, 1, "its fetches stop when the consumers drain")

	for _, j := range []struct{ group, id string }{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}} {
		require.Eventually(t, func() bool { return h.f.state(j.id) == fairway.StateWaiting }, serviceWait, 5*time.Millisecond,
			"%s stored, its event published by the leader", j.id)
		job, err := h.e.get(t.Context(), j.group, j.id)
		require.NoError(t, err)
		require.Equal(t, fairway.StateWaiting, job.State)
		require.Equal(t, 3, job.MaxRetries, "the default of ingestConfig.Retries")
	}
	require.Empty(t, jobState(t, h.e, "b", "b2"), "the invalid submission is refused")
	require.Eventually(t, func() bool { return h.f.kicked() > 0 }, serviceWait, 5*time.Millisecond, "its rejected event is published (the outbox)")

	for _, g := range []string{"a", "b"} {
		cons, err := h.js.Consumer(t.Context(), h.subjects.SubmitStream(), "ingest-"+g)
		require.NoError(t, err, "each group has a consumer of its own")
		require.Equal(t, h.subjects.Prefix+".submit."+g+".>", cons.CachedInfo().Config.FilterSubject)
		requireAllAcked(t, cons, "every message is acknowledged")
	}
	// Published once ingest runs: the stream's announcement brings it.
	// A batch with nothing refused leaves the outbox alone (the relay's
	// read of it is a transaction).
	kicks := h.f.kicked()
	h.publish(t, h.subjects.Submit("c", "t"), `{"id":"c1"}`)
	require.Eventually(t, func() bool { return jobState(t, h.e, "c", "c1") == fairway.StateWaiting }, serviceWait, 10*time.Millisecond)
	cons, err := h.js.Consumer(t.Context(), h.subjects.SubmitStream(), "ingest-c")
	require.NoError(t, err)
	requireAllAcked(t, cons, "c1's message is acknowledged, its batch handled")
	require.Equal(t, kicks, h.f.kicked(), "no kick of the outbox for a batch that refused nothing")
}

// TestIngestAloneHandsJobsToAnIdleExecutor: an executor's dispatch
// request waits parked, idle for certain; the journal's leader stores the
// job it can run scheduled for it, ingest hands it over and takes the
// request out of the parking; the other job waits.
func TestIngestAloneHandsJobsToAnIdleExecutor(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newIngestHarness(t, ingestConfig{})
	err := h.st.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 1, Tasks: []string{"t"}},
		func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	parked := &parkedRequest{msg: &nats.Msg{Subject: h.subjects.Exec("w", events.ExecDispatch)},
		req:      events.DispatchRequest{Executor: "w", Instance: "i1", Slots: 1, Tasks: []string{"t"}, RequestID: fairway.NewID()},
		deadline: time.Now().Add(maxParkWait)}
	h.parking.park(parked, h.parking.generation())

	h.publish(t, h.subjects.Submit("g", "t"), `[{"id":"j1","args":{}},{"id":"j2","args":{}}]`)
	cons := testConsumer(t, h.js, h.subjects.SubmitStream())
	h.ingest.handle(ctx, fetch(t, cons, 1))

	select {
	case r := <-h.handedFor:
		require.Same(t, parked, r)
	case <-time.After(serviceWait):
		t.Fatal("no job was handed over")
	}
	jobs := <-h.handed
	require.Len(t, jobs, 1, "one free slot")
	require.Equal(t, "j1", jobs[0].ID, "in the batch's order")
	require.Equal(t, fairway.StateScheduled, jobState(t, h.e, "g", "j1"))
	require.Equal(t, fairway.StateWaiting, jobState(t, h.e, "g", "j2"))
	require.Zero(t, h.parking.len(), "the request is answered, no longer parked")
	requireAllAcked(t, cons, "the message is acknowledged")
}

// TestSubmitSourcesForgetIdleGroups: a group not announced for
// sourceInactive is forgotten (its consumer is gone by then too), so a
// coordinator's memory does not grow with every group that ever was; a
// group announced since is kept.
func TestSubmitSourcesForgetIdleGroups(t *testing.T) {
	t.Parallel()
	w := newStreamWorld(t)
	inbox := newFairInbox(10, 1<<20, 1<<20, func(jetstream.Msg) int { return 1 })
	s := newStreamSources(w.js, w.nc, submitLayout(w.subjects), w.log, inbox, 1<<20)
	s.stopping = true // no fetches: ring only records
	a, b := sourceKey{stream: w.subjects.SubmitStream(), group: "a"}, sourceKey{stream: w.subjects.SubmitStream(), group: "b"}
	s.ring(a)
	s.ring(b)
	s.sources[a].used = time.Now().Add(-2 * sourceInactive)
	s.forgetIdle()
	require.NotContains(t, s.sources, a)
	require.NotContains(t, s.byGroup, "a")
	require.Contains(t, s.sources, b)
	require.Len(t, s.byGroup["b"], 1)
}

// TestIngestPullsOnceForASubmissionAtLowLoad: submissions published one
// at a time, each stored before the next, are fetched with one pull each.
// A pull that JetStream ends for want of more, with every announced
// message fetched, ends the group's turn; before, every pull that brought
// a message was followed by another that brought none (a pull request and
// a 404 status more for every submission at low load).
func TestIngestPullsOnceForASubmissionAtLowLoad(t *testing.T) {
	t.Parallel()
	h := newIngestHarness(t, ingestConfig{Retries: 3, SweepEvery: time.Hour})
	var pulls atomic.Int64
	_, err := h.nc.Subscribe("$JS.API.CONSUMER.MSG.NEXT.>", func(*nats.Msg) { pulls.Add(1) })
	require.NoError(t, err)
	require.NoError(t, h.nc.Flush())
	ctx, cs, subs := startServices(t, h.js, h.nc)
	require.NoError(t, h.ingest.start(ctx, subs, cs))

	const n = 20
	// The first makes the group's consumer; its pulls are not counted.
	h.publish(t, h.subjects.Submit("a", "t"), `{"id":"warm","args":{}}`)
	require.Eventually(t, func() bool { return h.f.state("warm") == fairway.StateWaiting }, serviceWait, time.Millisecond)
	before := pulls.Load()
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		h.publish(t, h.subjects.Submit("a", "t"), `{"id":"`+id+`","args":{}}`)
		require.Eventually(t, func() bool { return h.f.state(id) == fairway.StateWaiting }, serviceWait, time.Millisecond, "%s stored", id)
	}
	got := pulls.Load() - before
	require.GreaterOrEqual(t, got, int64(n), "a pull for each submission")
	require.LessOrEqual(t, got, int64(n+n/4), "%d pulls for %d submissions, one at a time: the ones that found nothing came back", got, n)
}

// TestAPullCutByItsTimeoutLeavesNoInterestInItsInbox: a pull that
// JetStream never ends (here a responder that keeps the request) gives up
// after pullTimeout and renews the puller's subscription, so that a late
// answer to it (its request held through a reconnect, say) goes nowhere,
// as it did when each pull had a subscription of its own, rather than to
// a later pull of another consumer, which would drop it.
func TestAPullCutByItsTimeoutLeavesNoInterestInItsInbox(t *testing.T) {
	t.Parallel()
	_, nc := natstest.Start(t)
	reqs := make(chan *nats.Msg, 1)
	sub, err := nc.ChanSubscribe("$JS.API.CONSUMER.MSG.NEXT.S.C", reqs)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	p, err := newPuller(nc)
	require.NoError(t, err)
	defer p.close()
	prefix := p.prefix
	n, drained, err := p.pull(t.Context(), "S", "C", 10, 1<<20, 0, func(jetstream.Msg) { t.Error("nothing was to come") })
	require.NoError(t, err)
	require.Zero(t, n)
	require.False(t, drained, "cut by its timeout, not ended for want of messages")
	require.NotEqual(t, prefix, p.prefix, "the subscription is renewed under a new prefix")
	req := <-reqs
	require.True(t, strings.HasPrefix(req.Reply, prefix+"."), "the pull's inbox is under the old prefix")
	require.NoError(t, nc.Publish(req.Reply, []byte("late")))
	require.NoError(t, nc.Flush()) // the server delivers before it answers the flush
	require.Empty(t, p.ch, "a late answer to the cut pull came to the puller")
}

// TestAMessageHandedBackIsFetchedAgainWithoutASweep: messages handed back
// to JetStream with a delay (a database down: deadLetters.retryLater) are
// fetched again once due, each once more, with no sweep to find them.
// Before, JetStream held them for the next pull of their group, which
// only the next announcement or sweep brought: a partition's submissions
// stored up to 10 s after its database answered again.
func TestAMessageHandedBackIsFetchedAgainWithoutASweep(t *testing.T) {
	t.Parallel()
	w, s, _ := submitSourcesOfA(t, ackWait) // the first sweep only, at start, before anything is published
	delays := map[string]time.Duration{"a1": 100 * time.Millisecond, "a2": 400 * time.Millisecond}
	again := make(chan string, 4)
	var mu sync.Mutex
	seen := map[string]int{}
	ctx, cs, subs := startServices(t, w.js, w.nc)
	require.NoError(t, s.run(ctx, subs, cs, 10, func(_ context.Context, msgs []jetstream.Msg) {
		mu.Lock()
		defer mu.Unlock()
		for _, msg := range msgs {
			id := string(msg.Data())
			seen[id]++
			if seen[id] == 1 {
				require.NoError(t, msg.NakWithDelay(delays[id]))
				continue
			}
			require.NoError(t, msg.Ack())
			again <- id
		}
	}))
	for _, id := range []string{"a1", "a2"} {
		_, err := w.js.Publish(t.Context(), w.subjects.Submit("a", "t"), []byte(id))
		require.NoError(t, err)
	}
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case id := <-again:
			got[id] = true
		case <-time.After(serviceWait):
			t.Fatalf("handed back, fetched again: %v of a1 and a2", got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"a1": 2, "a2": 2}, seen, "each delivered twice")
}

// TestASweepAskedForFindsWhatADeadCoordinatorHeld: a message handed to a
// coordinator that died unacknowledged is handed out again after the ack
// wait, but only to a pull, and the group is pulled only when rung: a
// sweep asked for then (streamSources.sweepAfter, when a coordinator
// takes the lead) finds it, where the periodic sweep alone came up to
// sourceSweepEvery later.
func TestASweepAskedForFindsWhatADeadCoordinatorHeld(t *testing.T) {
	t.Parallel()
	w, s, src := submitSourcesOfA(t, 500*time.Millisecond)

	// The dead coordinator: the group's consumer hands it the message,
	// which it never acknowledges.
	cfg := s.consumerConfig
	cfg.Durable, cfg.FilterSubject = src.name, src.filter
	cons, err := w.js.CreateOrUpdateConsumer(t.Context(), w.subjects.SubmitStream(), cfg)
	require.NoError(t, err)
	_, err = w.js.Publish(t.Context(), w.subjects.Submit("a", "t"), []byte("a1"))
	require.NoError(t, err)
	held, err := cons.Fetch(1, jetstream.FetchMaxWait(serviceWait))
	require.NoError(t, err)
	for range held.Messages() {
	}
	require.NoError(t, held.Error())

	got := make(chan string, 1)
	ctx, cs, subs := startServices(t, w.js, w.nc)
	require.NoError(t, s.run(ctx, subs, cs, 10, func(_ context.Context, msgs []jetstream.Msg) {
		for _, msg := range msgs {
			require.NoError(t, msg.Ack())
			got <- string(msg.Data())
		}
	}))
	// The first sweep rang the group while the message was held: its
	// fetch found nothing. The sweep asked for comes after the ack wait.
	s.sweepAfter(time.Second)
	select {
	case id := <-got:
		require.Equal(t, "a1", id)
	case <-time.After(serviceWait):
		t.Fatal("the message the dead coordinator held was not fetched")
	}
}

// TestMessagesHeldLongerThanTheAckWaitAreKeptAlive: a batch whose
// handling outlasts the consumers' ack wait (a database that stalls) is
// not handed to another coordinator meanwhile: the coordinator says it
// still works on it (streamSources.keepAlive). The ack wait then bounds
// only how long a dead coordinator's messages wait.
func TestMessagesHeldLongerThanTheAckWaitAreKeptAlive(t *testing.T) {
	t.Parallel()
	w, s, src := submitSourcesOfA(t, 600*time.Millisecond)
	s.keepAliveEvery = 150 * time.Millisecond

	handling, release := make(chan struct{}), make(chan struct{})
	ctx, cs, subs := startServices(t, w.js, w.nc)
	require.NoError(t, s.run(ctx, subs, cs, 10, func(_ context.Context, msgs []jetstream.Msg) {
		close(handling)
		<-release // a slow batch: past the ack wait
		for _, msg := range msgs {
			require.NoError(t, msg.Ack())
		}
	}))
	_, err := w.js.Publish(t.Context(), w.subjects.Submit("a", "t"), []byte("a1"))
	require.NoError(t, err)
	select {
	case <-handling:
	case <-time.After(serviceWait):
		t.Fatal("the message was not handled")
	}
	// Another coordinator pulls from the group's consumer for three ack
	// waits: it must get nothing.
	other, err := w.js.Consumer(t.Context(), w.subjects.SubmitStream(), src.name)
	require.NoError(t, err)
	got, err := other.Fetch(1, jetstream.FetchMaxWait(3*s.consumerConfig.AckWait))
	require.NoError(t, err)
	for msg := range got.Messages() {
		t.Errorf("handed to another coordinator while held: %s", msg.Data())
	}
	close(release)
}

// submitSourcesOfA are the submit streams' sources of a new stream world,
// not started, swept at start only, their consumers' ack wait wait, and
// group a's source (its consumer's name and filter).
func submitSourcesOfA(t *testing.T, wait time.Duration) (streamWorld, *streamSources, *source) {
	t.Helper()
	w := newStreamWorld(t)
	inbox := newFairInbox(10, 1<<20, 1<<20, func(jetstream.Msg) int { return 1 })
	s := newStreamSources(w.js, w.nc, submitLayout(w.subjects), w.log, inbox, 1<<20)
	s.sweepEvery = time.Hour
	s.consumerConfig.AckWait = wait
	return w, s, s.newSource(sourceKey{stream: w.subjects.SubmitStream(), group: "a"})
}

// TestAPeerNotHeardIsGone: coordinators hear each other's beats; one
// that stops beating (killed, cut off, stopped) is found gone by the
// others, who then sweep for what it held; one that beats is not.
func TestAPeerNotHeardIsGone(t *testing.T) {
	t.Parallel()
	_, nc := natstest.Start(t)
	subject := events.NewSubjects("").CoordinatorBeat()
	gone := make(chan string, 4)
	start := func(ctx context.Context, name string) {
		t.Helper()
		_, cs, subs := startServices(t, nil, nc)
		p := &peers{nc: nc, subject: subject, holder: name, gone: func() { gone <- name }}
		require.NoError(t, p.start(ctx, subs, cs.goLoop))
	}
	ctx, stop := context.WithCancel(t.Context())
	start(t.Context(), "a")
	start(ctx, "b")
	// Both beat: neither is gone for five beats.
	select {
	case who := <-gone:
		t.Fatalf("%s found a beating peer gone", who)
	case <-time.After(5 * peerBeat):
	}
	stop() // b stops beating
	select {
	case who := <-gone:
		require.Equal(t, "a", who, "a finds b gone")
	case <-time.After(serviceWait):
		t.Fatal("a did not find b gone")
	}
}
