package coordinator_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsserver"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// twoJournalCoordinators starts two coordinators on the journal engine,
// on one database and one NATS server: the harness's (which leads, having
// started first) and a second one (which follows).
func twoJournalCoordinators(t *testing.T) (*harness, *coordinator.Coordinator, *coordinator.Coordinator) {
	t.Helper()
	retries := 3
	// The test's requests come as fast as they are answered: no API rate.
	cfg := coordinator.Config{RetryDelay: 20 * time.Millisecond, Retries: &retries, APIRate: -1}
	st := storetest.Open(t)
	h, first := setupOn(t, st, cfg)
	nc2, err := natsserver.Connect(h.ns, t.Name()+"-second")
	require.NoError(t, err)
	t.Cleanup(nc2.Close)
	cfg.Logger = testLogger(t)
	second, err := coordinator.New(storetest.Public(st), nc2, cfg)
	require.NoError(t, err)
	require.NoError(t, second.Start(t.Context()))
	t.Cleanup(second.Stop)
	return h, first, second
}

// TestJournalEngineAPIReadsYourWritesOnEitherCoordinator: with two
// coordinators on the journal engine, which answer API requests as NATS
// hands them out (either one), a job submitted, re-prioritised, cancelled,
// retried or released is read back at once as the acknowledgement said,
// 1,000 times (condition 2 of issue 31); the follower forwards the changes
// to the leader. Without the read's fold of the rows committed before
// it, a follower answers "not found" for a job just submitted through
// the leader.
func TestJournalEngineAPIReadsYourWritesOnEitherCoordinator(t *testing.T) {
	t.Parallel()
	h, first, second := twoJournalCoordinators(t)
	ctx := t.Context()
	c := h.client
	for i := range 1000 {
		sub := fairway.Submission{Group: "acme", Task: "echo", ID: fmt.Sprintf("j%04d", i), Args: []byte(fmt.Sprintf(`{"n":%d}`, i)), Pending: i%10 == 5}
		job, err := c.SubmitWait(ctx, sub)
		require.NoError(t, err, "submitting %s", sub.ID)
		want := fairway.StateWaiting
		if sub.Pending {
			want = fairway.StatePending
		}
		require.Equal(t, want, job.State, "the submission's reply, %s", sub.ID)
		got, err := c.Get(ctx, "acme", sub.ID)
		require.NoError(t, err, "reading back %s", sub.ID)
		require.Equal(t, want, got.State, "job %s read back", sub.ID)
		require.JSONEq(t, string(sub.Args), string(got.Args), "job %s read back", sub.ID)

		// change makes a change and reads the job back.
		change := func(what string, do func() (*fairway.Job, error)) *fairway.Job {
			_, err := do()
			require.NoError(t, err, "%s %s", what, sub.ID)
			got, err := c.Get(ctx, "acme", sub.ID)
			require.NoError(t, err, "reading back %s after %s", sub.ID, what)
			return got
		}
		switch i % 10 {
		case 3:
			got = change("re-prioritising", func() (*fairway.Job, error) { return c.SetPriority(ctx, "acme", sub.ID, fairway.PriorityHigh) })
			require.Equal(t, fairway.PriorityHigh, got.Priority, "job %s re-prioritised", sub.ID)
		case 5:
			got = change("releasing", func() (*fairway.Job, error) { return c.Release(ctx, "acme", sub.ID) })
			require.Equal(t, fairway.StateWaiting, got.State, "job %s released", sub.ID)
		case 7:
			got = change("cancelling", func() (*fairway.Job, error) { return c.Cancel(ctx, "acme", sub.ID) })
			require.Equal(t, fairway.StateCancelled, got.State, "job %s cancelled", sub.ID)
			got = change("retrying", func() (*fairway.Job, error) { return c.Retry(ctx, "acme", sub.ID) })
			require.Equal(t, fairway.StateWaiting, got.State, "job %s retried", sub.ID)
		}
	}
	require.Positive(t, first.Forwarded()+second.Forwarded(), "the follower forwarded changes to the leader")

	// The verbs' rules hold.
	_, err := c.Get(ctx, "acme", "nope")
	require.ErrorIs(t, err, fairway.ErrNotFound)
	_, err = c.Cancel(ctx, "acme", "nope")
	require.ErrorIs(t, err, fairway.ErrNotFound)
	_, err = c.Release(ctx, "acme", "j0000")
	require.ErrorIs(t, err, fairway.ErrConflict, "not pending")
	_, err = c.Retry(ctx, "acme", "j0000")
	require.ErrorIs(t, err, fairway.ErrConflict, "not ended")
	_, err = c.SetPriority(ctx, "acme", "j0000", "urgent")
	require.ErrorIs(t, err, fairway.ErrInvalid)
	job, err := c.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo", ID: "j0001"})
	require.NoError(t, err, "a submission of an id taken answers its job")
	require.Equal(t, "j0001", job.ID)
	_, err = c.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo", Tracker: "daily"})
	require.NoError(t, err)
	_, err = c.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo", Tracker: "daily"})
	require.ErrorIs(t, err, fairway.ErrDuplicate, "a tracker a live job holds")
	graph, err := c.Graph(ctx, "acme", "j0001")
	require.NoError(t, err)
	require.Len(t, graph, 1, "a job without dependencies is its own graph")

	// The jobs run, and their records answer once they ended.
	h.executor("ex1", 8, map[string]executor.Handler{"echo": echo})
	require.Equal(t, fairway.StateSuccess, lastState(h.final("j0002")))
	job, err = c.Get(ctx, "acme", "j0002")
	require.NoError(t, err)
	require.Equal(t, fairway.StateSuccess, job.State)
	require.JSONEq(t, `{"n":2}`, string(job.Args))
}

// TestJournalEngineForwardsThroughATakeover: a change asked of the
// follower while the leader is gone waits for a coordinator to lead (the
// follower itself, once the lease runs out) instead of failing.
func TestJournalEngineForwardsThroughATakeover(t *testing.T) {
	t.Parallel()
	h, first, _ := twoJournalCoordinators(t)
	ctx := t.Context()
	_, err := h.client.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo", ID: "a"})
	require.NoError(t, err)
	first.Stop() // its lease is not given up: it runs out, as a killed leader's
	job, err := h.client.Cancel(ctx, "acme", "a")
	require.NoError(t, err)
	require.Equal(t, fairway.StateCancelled, job.State)
}

// TestJournalEngineLimitsRatesAndWeights: on the journal, with two
// coordinators answering the API (a follower forwards the changes), a
// concurrency limit of 0 keeps a task's job waiting while later jobs of
// another task run, and the limits' held counts are the state's; a rate
// limit of one start an hour lets one of two jobs start, and its removal
// the other; a weight set is a weight row of the journal. Before, the
// journal's claims read none of them.
func TestJournalEngineLimitsRatesAndWeights(t *testing.T) {
	t.Parallel()
	h, _, _ := twoJournalCoordinators(t)
	ctx := t.Context()
	c := h.client
	gate := make(chan struct{})
	ex := h.newExecutor(executor.Config{AppID: "ex1", PoolSize: 4})
	ex.Handle("slow", func(ctx context.Context, _ *executor.Job) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	ex.Handle("quick", echo)
	ex.Handle("mail", echo)
	require.NoError(t, ex.Start(ctx))

	limits, err := c.SetLimit(ctx, "task", "slow", 0)
	require.NoError(t, err)
	require.Equal(t, []fairway.Limit{{Kind: "task", Name: "slow", Max: 0, Held: 0, Updated: limits[0].Updated}}, limits)
	slow := submit(t, h, fairway.Submission{Group: "g", Task: "slow"})
	quick := submit(t, h, fairway.Submission{Group: "g", Task: "quick"})
	h.until(func(ev events.Event) bool { return ev.JobID == quick && ev.State == fairway.StateSuccess })
	job, err := c.Get(ctx, "g", slow)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State, "the limit of 0 keeps the older slow job waiting while the quick one runs")

	_, err = c.SetLimit(ctx, "task", "slow", 1)
	require.NoError(t, err)
	h.until(func(ev events.Event) bool { return ev.JobID == slow && ev.State == fairway.StateRunning })
	limits, err = c.Limits(ctx)
	require.NoError(t, err)
	require.Len(t, limits, 1)
	require.Equal(t, 1, limits[0].Held, "the running slow job, counted by the partition's state")
	close(gate)
	h.until(func(ev events.Event) bool { return ev.JobID == slow && ev.State == fairway.StateSuccess })
	_, err = c.DeleteLimit(ctx, "task", "slow")
	require.NoError(t, err)

	_, err = c.SetRateLimit(ctx, "task:mail", "1/h")
	require.NoError(t, err)
	mails := map[string]bool{submit(t, h, fairway.Submission{Group: "g", Task: "mail"}): true, submit(t, h, fairway.Submission{Group: "g", Task: "mail"}): true}
	h.until(func(ev events.Event) bool {
		if mails[ev.JobID] && ev.State == fairway.StateSuccess {
			delete(mails, ev.JobID)
			return true
		}
		return false
	})
	var second string
	for id := range mails {
		second = id
	}
	quick = submit(t, h, fairway.Submission{Group: "g", Task: "quick"})
	h.until(func(ev events.Event) bool { return ev.JobID == quick && ev.State == fairway.StateSuccess })
	job, err = c.Get(ctx, "g", second)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State, "one start an hour: the second mail waits")
	_, err = c.DeleteRateLimit(ctx, "task:mail")
	require.NoError(t, err)
	h.until(func(ev events.Event) bool { return ev.JobID == second && ev.State == fairway.StateSuccess })
	_, err = c.DeleteRateLimit(ctx, "task:mail")
	require.ErrorIs(t, err, fairway.ErrNotFound)

	_, err = c.SetWeight(ctx, "g", 3)
	require.NoError(t, err)
	var weights int
	require.NoError(t, h.store.Pool().QueryRow(ctx, `SELECT count(*) FROM fairway_journal WHERE kind = 'weight'`).Scan(&weights))
	require.Equal(t, 1, weights, "the weight is the journal's")
}

// TestJournalEngineListsUnfinishedJobsThenRecords: the list verb on the
// journal gives the unfinished jobs first, newest submitted first, from
// the partition's state (either coordinator answers), then the ended ones,
// newest ended first, from their records; pages follow each other without
// a gap or a repeat across the two parts, and the filters apply to both.
func TestJournalEngineListsUnfinishedJobsThenRecords(t *testing.T) {
	t.Parallel()
	h, _, _ := twoJournalCoordinators(t)
	ctx := t.Context()
	c := h.client
	h.executor("ex1", 2, map[string]executor.Handler{"echo": echo})
	var ended, pending []string
	for i := range 5 {
		args := fmt.Sprintf(`{"n":%d}`, i)
		if i == 2 {
			args = `{"word":"Needle"}`
		}
		job, err := c.SubmitWait(ctx, fairway.Submission{Group: "a", Task: "echo", Args: []byte(args)})
		require.NoError(t, err)
		h.final(job.ID) // one at a time: they end in this order
		ended = append([]string{job.ID}, ended...)
	}
	for i := range 4 {
		args := fmt.Sprintf(`{"n":%d}`, i)
		if i == 1 {
			args = `{"word":"needle"}`
		}
		job, err := c.SubmitWait(ctx, fairway.Submission{Group: "a", Task: "echo", Args: []byte(args), Pending: true})
		require.NoError(t, err)
		pending = append([]string{job.ID}, pending...)
	}
	for range 2 {
		_, err := c.SubmitWait(ctx, fairway.Submission{Group: "b", Task: "echo", Pending: true})
		require.NoError(t, err)
	}
	ids := func(jobs []fairway.Job) []string {
		var out []string
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}

	all, err := c.List(ctx, events.ListRequest{Group: "a"})
	require.NoError(t, err)
	require.Equal(t, append(slices.Clone(pending), ended...), ids(all), "the unfinished, newest first, then the ended, newest ended first")
	require.Contains(t, []string{"", "null"}, string(all[0].Args), "a light listing has no args")
	require.Equal(t, fairway.StatePending, all[0].State)
	require.Equal(t, fairway.StateSuccess, all[4].State)

	var paged []string
	req := events.ListRequest{Group: "a", Limit: 3}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		jobs, next, err := c.ListPage(ctx, req)
		require.NoError(t, err)
		paged = append(paged, ids(jobs)...)
		if next == "" {
			break
		}
		req.Cursor = next
	}
	require.Equal(t, ids(all), paged, "pages of 3 across both parts")

	for _, tc := range []struct {
		req  events.ListRequest
		want []string
	}{
		{events.ListRequest{Group: "a", State: fairway.StatePending}, pending},
		{events.ListRequest{Group: "a", State: fairway.StateSuccess}, ended},
		{events.ListRequest{Group: "a", Text: "NEEDLE"}, []string{pending[2], ended[2]}},
	} {
		jobs, err := c.List(ctx, tc.req)
		require.NoError(t, err)
		require.Equal(t, tc.want, ids(jobs), "%+v", tc.req)
	}
	b, err := c.List(ctx, events.ListRequest{Group: "b", Full: true})
	require.NoError(t, err)
	require.Len(t, b, 2)
	require.JSONEq(t, `{}`, string(b[0].Args), "a full listing has the args")
	everyone, err := c.List(ctx, events.ListRequest{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, everyone, 11)

	_, _, err = c.ListPage(ctx, events.ListRequest{Group: "a", Cursor: "x1"})
	require.ErrorIs(t, err, fairway.ErrInvalid)
}

// TestARateLimitedJobStartsWhenItsBucketRefills: under a rate limit of one
// start a second, four jobs start about a second apart. A job passed over
// for its rate is due when its bucket refills, which no row announces: the
// executor's dispatch request, held a second at most (its long poll),
// asks again, and is answered then.
func TestARateLimitedJobStartsWhenItsBucketRefills(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := t.Context()
	_, err := h.client.SetRateLimit(ctx, "task:mail", "1/s")
	require.NoError(t, err)
	var ids []string
	for range 4 {
		ids = append(ids, submit(t, h, fairway.Submission{Group: "g", Task: "mail"}))
	}
	// Its own wake-up an hour, its heartbeats 10 s apart: neither asks
	// for work in the test's time.
	ex := h.newExecutor(executor.Config{AppID: "ex1", PoolSize: 4, Heartbeat: 10 * time.Second})
	ex.Handle("mail", echo)
	require.NoError(t, ex.Start(ctx))
	started := map[string]time.Time{}
	h.until(func(ev events.Event) bool {
		if slices.Contains(ids, ev.JobID) && ev.State == fairway.StateRunning {
			started[ev.JobID] = time.Now()
		}
		return len(started) == len(ids)
	})
	var times []time.Time
	for _, at := range started {
		times = append(times, at)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	span := times[len(times)-1].Sub(times[0])
	t.Logf("four starts of a task limited to 1/s over %s", span.Round(time.Millisecond))
	require.GreaterOrEqual(t, span, 2500*time.Millisecond, "the rate held: four starts need three refills")
	require.Less(t, span, 6*time.Second, "each start follows its bucket's refill, not a long poll's end (three of them: 9 s)")
}
