package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// setupWith is setup with a coordinator configured by cfg; it returns the
// coordinator too.
func setupWith(t *testing.T, cfg coordinator.Config) (*harness, *coordinator.Coordinator) {
	t.Helper()
	return setupOn(t, storetest.Open(t), cfg)
}

// setupRetrying is setup with 3 retries 20 ms apart.
func setupRetrying(t *testing.T) *harness {
	t.Helper()
	retries := 3
	h, _ := setupWith(t, coordinator.Config{RetryDelay: 20 * time.Millisecond, Retries: &retries})
	return h
}

// setupOn is setupWith on a store of the test's own.
func setupOn(t *testing.T, st *store.Store, cfg coordinator.Config) (*harness, *coordinator.Coordinator) {
	t.Helper()
	ctx := t.Context()
	ns, nc := natstest.Start(t)
	cfg.Logger = testLogger(t)
	coord, err := coordinator.New(storetest.Public(st), nc, cfg)
	require.NoError(t, err)
	require.NoError(t, coord.Start(ctx))
	t.Cleanup(coord.Stop)
	client, err := events.NewClient(nc, events.ClientOptions{MaxArgsSize: cfg.MaxArgsSize})
	require.NoError(t, err)
	h := &harness{t: t, ns: ns, nc: nc, store: st, client: client, events: make(chan events.Event, 10000)}
	sub, err := client.Subscribe(ctx, events.Filter{}, func(ev events.Event) { h.events <- ev })
	require.NoError(t, err)
	t.Cleanup(sub.Stop)
	return h, coord
}

// publishRaw publishes bodies to the submit stream as any client could,
// without the Go client's checks, and waits for JetStream's acks.
func publishRaw(t *testing.T, nc *nats.Conn, subject string, bodies ...[]byte) {
	t.Helper()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	var futures []jetstream.PubAckFuture
	for _, b := range bodies {
		f, err := js.PublishAsync(subject, b)
		require.NoError(t, err)
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-time.After(waitTimeout):
			t.Fatal("no ack from JetStream")
		}
	}
}

func blockUntilDone(ctx context.Context, _ *executor.Job) error {
	<-ctx.Done()
	return ctx.Err()
}

// One submission in 500 that PostgreSQL could not store (a number out of
// numeric's range) is rejected alone, by validation, naming its place in
// args; the others are stored, and no batch is split or sent again.
func TestPoisonSubmissionInABatch(t *testing.T) {
	t.Parallel()
	h, coord := setupWith(t, coordinator.Config{QuotaSubmitRate: -1})
	h.executor("ex", 1, map[string]executor.Handler{"slow": blockUntilDone})
	bodies := make([][]byte, 500)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"id":"job-%d","args":{"n":%d}}`, i, i)
	}
	bodies[250] = []byte(`{"id":"poison","args":{"x":1e1000000}}`)
	publishRaw(t, h.nc, h.client.Subjects().Submit("acme", "slow"), bodies...)
	created := map[string]bool{}
	var rejected []events.Event
	h.until(func(ev events.Event) bool {
		switch {
		case ev.State == fairway.StateRejected:
			rejected = append(rejected, ev)
		case ev.PreviousState == "":
			created[ev.JobID] = true
		}
		return len(created)+len(rejected) == 500
	})
	require.Len(t, created, 499)
	require.Len(t, rejected, 1)
	require.Equal(t, "poison", rejected[0].JobID)
	require.Equal(t, fairway.CodeInvalid, rejected[0].Code)
	require.Equal(t, "args", rejected[0].Field)
	require.Contains(t, rejected[0].Error, "args.x is a number out of range")
	require.Zero(t, coord.Splits(), "no batch split to find the poison: none refused by PostgreSQL")
}

// A report PostgreSQL refuses is tried again a bounded number of times,
// then moved to the dead-letter stream, while the other reports are
// applied. What Fairway can tell PostgreSQL would refuse it makes storable
// first (text, numbers: see fairway.CleanJSON), so the test adds a
// constraint of its own that refuses one result.
// On the journal, the leader writes the ended jobs' records in the
// transaction that appends their reports: PostgreSQL refuses the batch,
// and the outcomes are applied in halves until the refused one is found.
func TestPoisonReportIsDeadLettered(t *testing.T) {
	t.Parallel()
	poisonReportIsDeadLettered(t)
}

func poisonReportIsDeadLettered(t *testing.T) {
	st := storetest.Open(t)
	_, err := st.Pool().Exec(t.Context(), `ALTER TABLE fairway_record ADD CONSTRAINT test_refuses_poison CHECK (jobs::text NOT LIKE '%"poison"%')`)
	require.NoError(t, err)
	h, _ := setupOn(t, st, coordinator.Config{DeadLetterAfter: 2})
	subjects := h.client.Subjects()
	dead, err := h.nc.SubscribeSync(subjects.DeadAll())
	require.NoError(t, err)
	release := make(chan struct{})
	h.executor("ex", 2, map[string]executor.Handler{
		"gate": func(ctx context.Context, job *executor.Job) error {
			<-release
			return job.SetResult(json.RawMessage(`{"ok":true}`))
		},
		"poisoned": func(ctx context.Context, job *executor.Job) error {
			return job.SetResult(json.RawMessage(`{"poison":true}`))
		},
	})
	id := submit(t, h, fairway.Submission{Group: "acme", Task: "gate"})
	h.until(func(ev events.Event) bool { return ev.JobID == id && ev.State == fairway.StateRunning })
	poisoned := submit(t, h, fairway.Submission{Group: "acme", Task: "poisoned"})
	close(release)
	evs := h.final(id)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State, "the other reports apply")

	msg, err := dead.NextMsg(waitTimeout)
	require.NoError(t, err)
	require.Equal(t, subjects.Dead(events.DeadReport), msg.Subject)
	require.Equal(t, subjects.Results("ex"), msg.Header.Get(events.HeaderDeadSubject))
	require.Equal(t, "2", msg.Header.Get(events.HeaderDeadDeliveries))
	require.Contains(t, msg.Header.Get(events.HeaderDeadReason), "PostgreSQL refused the outcome")
	require.Contains(t, msg.Header.Get(events.HeaderDeadReason), "test_refuses_poison")
	require.Contains(t, string(msg.Data), poisoned)

	// The subscriber above hears the message as NATS routes it; the stream
	// stores it on the same way, but its reading may come first on a
	// loaded machine (CI failed so): wait for the stream to hold it.
	js, err := jetstream.New(h.nc)
	require.NoError(t, err)
	var letters []events.DeadLetter
	require.Eventually(t, func() bool {
		letters, err = events.ListDeadLetters(t.Context(), js, subjects, 10)
		return err == nil && len(letters) > 0
	}, waitTimeout, 10*time.Millisecond, "the dead-letter stream holds the report")
	require.Len(t, letters, 1)
	require.Equal(t, events.DeadReport, letters[0].Kind)
	require.Equal(t, string(msg.Data), letters[0].Body)

	// An undecodable report goes at once.
	publishRaw(t, h.nc, subjects.Results("ghost"), []byte(`{not json`))
	msg, err = dead.NextMsg(waitTimeout)
	require.NoError(t, err)
	require.Contains(t, msg.Header.Get(events.HeaderDeadReason), "undecodable executor report")
}

// A rejected submission whose id would make an event larger than
// max_payload (1.9 MB of '<', which JSON escapes as \u003c: 11 MB) gets
// a small rejected event; the outbox does not wedge: other tenants'
// events still arrive, also after a coordinator restart.
func TestOversizedRejectionDoesNotWedgeTheOutbox(t *testing.T) {
	t.Parallel()
	cfg := coordinator.Config{MaxArgsSize: 2 << 20, Logger: testLogger(t)}
	h, coord := setupWith(t, cfg)
	h.executor("ex", 4, map[string]executor.Handler{"echo": echo})
	body := `{"id":"` + strings.Repeat("<", 1_900_000) + `"}`
	publishRaw(t, h.nc, h.client.Subjects().Submit("evil", "echo"), []byte(body))
	var rejected events.Event
	h.until(func(ev events.Event) bool { rejected = ev; return ev.State == fairway.StateRejected })
	require.Equal(t, "evil", rejected.Group)
	require.LessOrEqual(t, utf8.RuneCountInString(rejected.JobID), fairway.MaxIDLength)
	require.Contains(t, rejected.JobID, "[truncated]")
	require.LessOrEqual(t, len(rejected.Error), fairway.MaxErrorTextSize)

	id := submit(t, h, fairway.Submission{Group: "good", Task: "echo"})
	evs := h.final(id)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)

	coord.Stop()
	cfg.Logger = testLogger(t)
	again, err := coordinator.New(storetest.Public(h.store), h.nc, cfg)
	require.NoError(t, err)
	require.NoError(t, again.Start(t.Context()))
	t.Cleanup(again.Stop)
	id = submit(t, h, fairway.Submission{Group: "good", Task: "echo"})
	evs = h.final(id)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)
}

// A group over its quota of non-final jobs is refused with code quota, on
// the request/reply API and as a rejected event on the asynchronous path;
// other groups are not.
// On the journal, the count is the partition's state's (State.Live):
// fairway_job holds no unfinished job there, and the quota counted none
// before.
func TestQuotaOnNonFinalJobs(t *testing.T) {
	t.Parallel()
	retries := 0
	h, _ := setupWith(t, coordinator.Config{QuotaJobs: 3, QuotaSubmitRate: -1, RetryDelay: 20 * time.Millisecond, Retries: &retries})
	quotaOnNonFinalJobs(t, h)
}

func quotaOnNonFinalJobs(t *testing.T, h *harness) {
	h.executor("ex", 1, map[string]executor.Handler{"echo": echo})
	for i := range 3 {
		_, err := h.client.SubmitWait(t.Context(), fairway.Submission{ID: fmt.Sprint("held-", i), Group: "acme", Task: "echo", Pending: true})
		require.NoError(t, err)
	}
	_, err := h.client.SubmitWait(t.Context(), fairway.Submission{ID: "over-api", Group: "acme", Task: "echo", Pending: true})
	require.ErrorIs(t, err, fairway.ErrQuota)
	h.until(func(ev events.Event) bool {
		return ev.JobID == "over-api" && ev.State == fairway.StateRejected && ev.Code == fairway.CodeQuota
	})
	submit(t, h, fairway.Submission{ID: "over-async", Group: "acme", Task: "echo", Pending: true})
	h.until(func(ev events.Event) bool {
		return ev.JobID == "over-async" && ev.State == fairway.StateRejected && ev.Code == fairway.CodeQuota
	})
	_, err = h.client.SubmitWait(t.Context(), fairway.Submission{ID: "other", Group: "globex", Task: "echo", Pending: true})
	require.NoError(t, err)

	// Jobs stored past this coordinator's admission, in an application's
	// transaction, count as well.
	tx, err := h.store.Pool().Begin(t.Context())
	require.NoError(t, err)
	for i := range 3 {
		_, err = store.InsertTx(t.Context(), tx, store.TxOptions{}, fairway.Submission{ID: fmt.Sprint("tx-", i), Group: "initech", Task: "echo", Pending: true})
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit(t.Context()))
	_, err = h.client.SubmitWait(t.Context(), fairway.Submission{ID: "over-tx", Group: "initech", Task: "echo", Pending: true})
	require.ErrorIs(t, err, fairway.ErrQuota, "the three jobs of the application's transaction count")
}

// A group submitting faster than its rate quota is refused with code
// quota beyond its burst.
// TestSubmitRateDefersNeverRefuses: over its submission rate a group's
// asynchronous submissions are stored later, in order, none refused; a
// request/reply submission waits for the rate up to its deadline, and is
// refused only if that is too short; another group is not slowed.
func TestSubmitRateDefersNeverRefuses(t *testing.T) {
	t.Parallel()
	const rate = 10 // per second, a burst of 2
	reg := prometheus.NewRegistry()
	h, _ := setupWith(t, coordinator.Config{QuotaSubmitRate: rate, QuotaSubmitBurst: 2, Metrics: reg})
	h.executor("ex", 1, map[string]executor.Handler{"echo": echo})
	start := time.Now()
	for i := range 4 {
		submit(t, h, fairway.Submission{ID: fmt.Sprint("r-", i), Group: "acme", Task: "echo", Pending: true})
	}
	var stored []string
	var last time.Time
	h.until(func(ev events.Event) bool {
		if ev.PreviousState == "" && ev.Group == "acme" {
			stored = append(stored, ev.JobID+":"+string(ev.State)+":"+string(ev.Code))
			last = time.Now()
		}
		return len(stored) == 4
	})
	require.Equal(t, []string{"r-0:pending:", "r-1:pending:", "r-2:pending:", "r-3:pending:"}, stored,
		"every submission stored, in order, none refused")
	require.GreaterOrEqual(t, last.Sub(start), 150*time.Millisecond,
		"two beyond the burst of 2 at 10/s are stored 100 and 200 ms after it, not at once")
	require.Positive(t, counterValue(t, reg, "fairway_ingest_rate_deferrals_total"), "the deferrals are counted")

	// A message of 20 is taken whole once the bucket has a token: acme
	// owes about two seconds after it.
	many := make([]fairway.Submission, 20)
	for i := range many {
		many[i] = fairway.Submission{ID: fmt.Sprint("m-", i), Group: "acme", Task: "echo", Pending: true}
	}
	_, err := h.client.SubmitMany(t.Context(), many)
	require.NoError(t, err)
	n := 0
	h.until(func(ev events.Event) bool {
		if ev.PreviousState == "" && strings.HasPrefix(ev.JobID, "m-") {
			require.Equal(t, fairway.StatePending, ev.State, "refused: %+v", ev)
			n++
		}
		return n == len(many)
	})
	// A request/reply submission whose deadline is shorter than that wait
	// is refused at once, naming the deadline ...
	short, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err = h.client.SubmitWait(short, fairway.Submission{Group: "acme", Task: "echo", Pending: true})
	require.ErrorIs(t, err, fairway.ErrQuota)
	require.ErrorContains(t, err, "deadline")
	// Another group has a bucket of its own: with a deadline shorter than
	// acme's wait it is stored at once.
	other, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err = h.client.SubmitWait(other, fairway.Submission{Group: "globex", Task: "echo", Pending: true})
	require.NoError(t, err, "globex waited for acme's rate")
	// And acme's request with time to wait is stored.
	long, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	job, err := h.client.SubmitWait(long, fairway.Submission{Group: "acme", Task: "echo", Pending: true})
	require.NoError(t, err)
	require.Equal(t, fairway.StatePending, job.State)
}

// counterValue reads the value of the counter name (without labels) from
// reg; 0 if it has none.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
