package isolation_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	fstore "github.com/fairwayhq/fairway/store"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// The attack on dependency resolution (issue 23): globex holds thousands
// of jobs that each wait for the maximum of dependencies, and lets those
// dependencies end one after another, each end asking for the resolution
// of all its dependents; acme's two-step chain A → B must go on resolving
// as fast as when idle.
const (
	// backlogDeps and backlogJobs size globex's backlog: 4,000 jobs of
	// 256 dependencies each, 1,024,000 dependency entries to look up at
	// every end of one of the 256 (the report's 60,000 such jobs cost
	// 15 times more; 4,000 keep the test well under a minute).
	backlogDeps = fairway.MaxDependencies
	backlogJobs = 4000
	// stepBound bounds acme's resolution of B after A succeeded (the
	// events' database times: A's success to B's release) during the
	// attack. Idle, it is a few milliseconds; before the resolution was
	// shared between groups, one statement resolved globex's backlog
	// ahead of it: 1 to 2.5 s here, 13.6 to 45 s with 60,000 jobs.
	stepBound = 200 * time.Millisecond
	// stepMax bounds every one of them: a loaded machine has stretched
	// a whole step (to 495 ms once in CI, its resolution 279 ms), which
	// the median (held by stepBound) absorbs; a resolution queued behind
	// globex's backlog took seconds, over stepMax.
	stepMax = 600 * time.Millisecond
	// graphBound bounds a graph answer on a 3,000-job workflow with
	// edges that skip levels (it timed out, 10 s, before).
	graphBound = time.Second
)

// waitAll waits for an event matching each of match, in any order, and
// returns them.
func waitAll(t *testing.T, ch <-chan events.Event, what string, match ...func(events.Event) bool) []events.Event {
	t.Helper()
	got := make([]events.Event, len(match))
	left := len(match)
	timeout := time.After(waitTimeout)
	for left > 0 {
		select {
		case ev := <-ch:
			for i, m := range match {
				if got[i].ID == "" && m(ev) {
					got[i] = ev
					left--
					break
				}
			}
		case <-timeout:
			t.Fatalf("no event: %s", what)
		}
	}
	return got
}

// acmeStep runs acme's A → B once: A held, B depending on it, A released.
// It returns how long B's resolution took (A's success to B's release, by
// the events' database times) and the whole step (release to B's success).
func acmeStep(t *testing.T, e *env, ch <-chan events.Event, name string) (resolve, step time.Duration) {
	t.Helper()
	ctx := t.Context()
	a, err := e.acmeClient.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo", Pending: true})
	require.NoError(t, err)
	b, err := e.acmeClient.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo", DependsOn: []string{a.ID}})
	require.NoError(t, err)
	require.Equal(t, fairway.StatePending, b.State)
	start := time.Now()
	_, err = e.acmeClient.Release(ctx, "acme", a.ID)
	require.NoError(t, err)
	evs := waitAll(t, ch, name,
		func(ev events.Event) bool { return ev.JobID == a.ID && ev.State == fairway.StateSuccess },
		func(ev events.Event) bool { return ev.JobID == b.ID && ev.State == fairway.StateWaiting },
		func(ev events.Event) bool { return ev.JobID == b.ID && ev.State == fairway.StateSuccess })
	return evs[1].Time.Sub(evs[0].Time), time.Since(start)
}

// TestDependencyBacklogDelaysNoOtherTenant: globex's 4,000 jobs wait for
// its 256 held jobs, and globex releases those, so that each of their
// successes asks for its 4,000 dependents' resolution (1,024,000 key
// look-ups each time). acme's A → B resolves within stepBound (the
// median of five steps) and stepMax (each) throughout (the figures are
// logged), and nothing of globex's is lost: once all 256 have succeeded,
// its 4,000 jobs are released.
//
// The leader's fold of such a resolution once copied every dependent's
// 256 dependencies per end and held its lease's renewal back until the
// lease ran out (a release refused: "another leads it").
func TestDependencyBacklogDelaysNoOtherTenant(t *testing.T) {
	dependencyBacklog(t, setup(t))
}

func dependencyBacklog(t *testing.T, e *env) {
	ctx := t.Context()
	acmeEvents := eventsOf(t, e.acmeClient)

	// globex's backlog, stored directly for speed: through the API, the
	// default quotas (1,000 submissions/s, 100,000 queued jobs) let a
	// tenant store the same in a few seconds.
	var deps []string
	var subs []fairway.Submission
	for i := range backlogDeps {
		id := fmt.Sprintf("globex-dep-%03d", i)
		deps = append(deps, id)
		subs = append(subs, fairway.Submission{Group: "globex", ID: id, Task: "echo", Pending: true})
	}
	store := func(subs []fairway.Submission) {
		// In a transaction of the test's own (store.InsertTx), as a
		// program beside Fairway's database would: on either engine.
		require.NoError(t, pgx.BeginFunc(ctx, e.store.Pool(), func(tx pgx.Tx) error {
			_, err := fstore.InsertTx(ctx, tx, fstore.TxOptions{}, subs...)
			return err
		}))
	}
	start := time.Now()
	store(subs)
	for b := 0; b < backlogJobs; b += 500 {
		subs = nil
		for i := b; i < b+500; i++ {
			subs = append(subs, fairway.Submission{Group: "globex", ID: fmt.Sprintf("globex-held-%05d", i), Task: "echo", DependsOn: deps})
		}
		store(subs)
	}
	t.Logf("globex's backlog: %d jobs of %d dependencies each, stored in %v", backlogJobs, backlogDeps, time.Since(start).Round(time.Millisecond))

	// globex's releases and its dependencies' successes, counted.
	var released, succeeded atomic.Int64
	allReleased, attackOn := make(chan struct{}), make(chan struct{})
	sub, err := e.globexClient.Subscribe(ctx, events.Filter{}, func(ev events.Event) {
		switch {
		case ev.State == fairway.StateWaiting && ev.PreviousState == fairway.StatePending && strings.HasPrefix(ev.JobID, "globex-held-"):
			if released.Add(1) == backlogJobs {
				close(allReleased)
			}
		case ev.State == fairway.StateSuccess && strings.HasPrefix(ev.JobID, "globex-dep-"):
			if succeeded.Add(1) == 1 {
				close(attackOn)
			}
		}
	})
	require.NoError(t, err)
	t.Cleanup(sub.Stop)

	var idle []time.Duration
	for i := range 3 {
		resolve, step := acmeStep(t, e, acmeEvents, fmt.Sprintf("idle step %d", i))
		idle = append(idle, resolve)
		t.Logf("idle: acme's B resolved %v after A succeeded (step %v)", resolve, step.Round(time.Millisecond))
	}

	// The attack: globex releases its 256 dependencies, one request each.
	attackStart := time.Now()
	releases := make(chan error, 1)
	go func() {
		for _, id := range deps {
			if _, err := e.globexClient.Release(ctx, "globex", id); err != nil {
				releases <- err
				return
			}
		}
		releases <- nil
	}()
	select {
	case <-attackOn:
	case <-time.After(waitTimeout):
		t.Fatal("no dependency of globex's succeeded")
	}
	var attacked []time.Duration
	for i := range 5 {
		resolve, step := acmeStep(t, e, acmeEvents, fmt.Sprintf("attacked step %d", i))
		attacked = append(attacked, resolve)
		t.Logf("attack: acme's B resolved %v after A succeeded (step %v); globex: %d of %d dependencies succeeded, %d of %d jobs released",
			resolve, step.Round(time.Millisecond), succeeded.Load(), backlogDeps, released.Load(), backlogJobs)
	}
	inProgress := released.Load() < backlogJobs
	require.NoError(t, <-releases)
	select {
	case <-allReleased:
	case <-time.After(2 * time.Minute):
		t.Fatalf("globex's jobs lost: %d of %d released", released.Load(), backlogJobs)
	}
	t.Logf("globex's %d jobs all released %v after its first release", backlogJobs, time.Since(attackStart).Round(time.Millisecond))
	sorted := slices.Sorted(slices.Values(attacked))
	median := sorted[len(sorted)/2]
	t.Logf("acme's resolution of B: idle %v, during the attack %v (median %v, bound %v; max %v, bound %v)", idle, attacked, median, stepBound, sorted[len(sorted)-1], stepMax)
	require.LessOrEqual(t, median, stepBound, "the median of acme's resolutions during the attack")
	for _, d := range attacked {
		require.LessOrEqual(t, d, stepMax)
	}
	require.True(t, inProgress, "acme's steps ran while globex's backlog was being resolved")
}

// TestGraphOfAHugeWorkflowIsBounded: globex submits a 3,000-job workflow
// (three of 1,000, the most one request may hold) whose jobs each depend
// on the 1st, 2nd and 5th job before them, held at its root. The graph of
// its middle job has thousands of relatives, reachable along countless
// paths: it is answered within graphBound, with the nearest 500 and a
// warning that it was truncated.
func TestGraphOfAHugeWorkflowIsBounded(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	id := func(i int) string { return fmt.Sprintf("wf-%04d", i) }
	const n = 3 * fairway.MaxWorkflowJobs
	for b := 0; b < n; b += fairway.MaxWorkflowJobs {
		var jobs []fairway.WorkflowJob
		for i := b; i < b+fairway.MaxWorkflowJobs; i++ {
			j := fairway.WorkflowJob{Ref: id(i), Submission: fairway.Submission{ID: id(i), Task: "echo", Pending: i == 0}}
			for _, k := range []int{1, 2, 5} {
				if i-k >= 0 {
					j.DependsOn = append(j.DependsOn, id(i-k))
				}
			}
			jobs = append(jobs, j)
		}
		_, err := e.globexClient.SubmitWorkflow(ctx, "globex", fairway.Workflow{Jobs: jobs})
		require.NoError(t, err)
	}
	body, err := json.Marshal(events.JobRequest{ID: id(n / 2)})
	require.NoError(t, err)
	subject := events.NewSubjects("").API("globex", events.VerbGraph)
	for i := range 3 {
		start := time.Now()
		msg, err := e.globex.Request(subject, body, 2*graphBound)
		took := time.Since(start)
		require.NoError(t, err, "no answer within %v", 2*graphBound)
		var reply events.Reply
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
		require.Nil(t, reply.Error)
		t.Logf("graph %d of the middle of a %d-job workflow with skip edges: %d jobs in %v, %q (%d bytes)", i, n, len(reply.Jobs), took, reply.Warning, len(msg.Data))
		require.Less(t, took, graphBound)
		require.Len(t, reply.Jobs, 500)
		require.Contains(t, reply.Warning, "truncated")
	}
	graph, err := e.globexClient.Graph(ctx, "globex", id(n/2))
	require.NoError(t, err)
	require.Len(t, graph, 500)
	_, err = e.acmeClient.Graph(ctx, "acme", id(n/2))
	require.ErrorIs(t, err, fairway.ErrNotFound, "globex's workflow is not acme's")
}
