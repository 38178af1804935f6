package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// TestDependentsResolveWhatIsQueued runs the resolution of dependents on
// a coordinator that does not lead (so no sweep helps): the dependents of
// an ended job queued with the changes, and a job queued as stored with a
// dependency that had ended already, are resolved and followed up.
func TestDependentsResolveWhatIsQueued(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.Open(t)
	storeJobs(t, st, fairway.Submission{Group: "g", ID: "a"}, fairway.Submission{Group: "g", ID: "b"})
	storeJobs(t, st, fairway.Submission{Group: "g", ID: "after-a", DependsOn: []string{"a"}})
	_, err := st.Cancel(ctx, "g", "b")
	require.NoError(t, err)
	stored := storeJobs(t, st, fairway.Submission{Group: "g", ID: "after-b", DependsOn: []string{"b"}})
	require.Equal(t, fairway.StatePending, jobState(t, st, "g", "after-a"))
	require.Equal(t, fairway.StatePending, jobState(t, st, "g", "after-b"))

	f := newFollowUps()
	d := newDependents(dependentsConfig{}, storeBase(st, serviceLogger(t)), notLeading(t, st), f.afterChange)
	require.Equal(t, blockedSweepInterval, d.cfg.SweepInterval)
	runService(t, d.run)
	d.queueStored(stored)
	require.Eventually(t, func() bool { return f.state("after-b") == fairway.StateCancelled }, serviceWait, 10*time.Millisecond,
		"a job stored with a dependency cancelled already is cancelled")
	require.Equal(t, fairway.StateCancelled, jobState(t, st, "g", "after-b"))

	// a succeeds, and its change is queued as afterChange queues it.
	_, err = st.Claim(ctx, store.ClaimParams{Executor: "w", Limit: 2, Tasks: []string{"t"}, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	job, err := st.Get(ctx, "g", "a")
	require.NoError(t, err)
	at := store.Attempt{Group: "g", JobID: "a", Attempt: job.Attempt, Executor: "w"}
	applied, err := st.Complete(ctx, []store.Outcome{{Attempt: at, Kind: fairway.OutcomeSuccess}}, time.Hour)
	require.NoError(t, err)
	require.Len(t, applied, 1)
	d.queueChanges(applied)
	require.Eventually(t, func() bool { return f.state("after-a") == fairway.StateWaiting }, serviceWait, 10*time.Millisecond,
		"the dependent of a job that succeeded is released")
	require.Equal(t, fairway.StateWaiting, jobState(t, st, "g", "after-a"))
}

// TestDependentsSweepOnTheLeader: a blocked job whose dependency ended
// without its resolution being queued (a coordinator that died between the
// two) is resolved by the sweep the leader runs at start.
func TestDependentsSweepOnTheLeader(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.Open(t)
	storeJobs(t, st, fairway.Submission{Group: "g", ID: "a"})
	storeJobs(t, st, fairway.Submission{Group: "g", ID: "after-a", DependsOn: []string{"a"}})
	_, err := st.Cancel(ctx, "g", "a")
	require.NoError(t, err)

	f := newFollowUps()
	d := newDependents(dependentsConfig{SweepBatch: 1}, storeBase(st, serviceLogger(t)), leading(t, st), f.afterChange)
	runService(t, d.run)
	require.Eventually(t, func() bool { return f.state("after-a") == fairway.StateCancelled }, serviceWait, 10*time.Millisecond,
		"the sweep cancels the dependent of a cancelled job")
	require.Equal(t, fairway.StateCancelled, jobState(t, st, "g", "after-a"))
}

// groupBacklog stores in group g the jobs deps (then cancelled) and n
// jobs that each depend on all of them: n blocked jobs whose resolution
// (a cancellation) costs len(deps) key look-ups each.
func groupBacklog(t *testing.T, st *store.Store, g string, n int, deps ...string) []fairway.JobRef {
	t.Helper()
	for _, d := range deps {
		storeJobs(t, st, fairway.Submission{Group: g, ID: d})
		_, err := st.Cancel(t.Context(), g, d)
		require.NoError(t, err)
	}
	var refs []fairway.JobRef
	var batch []fairway.Submission
	for i := range n {
		id := fmt.Sprintf("blocked-%05d", i)
		batch = append(batch, fairway.Submission{Group: g, ID: id, DependsOn: deps})
		refs = append(refs, fairway.JobRef{Group: g, ID: id})
		if len(batch) == 250 || i == n-1 {
			storeJobs(t, st, batch...)
			batch = nil
		}
	}
	return refs
}

// resolutionOrder is an afterChange that records, when the job it waits
// for is resolved, how many jobs of the other groups had been resolved
// by then (that one's statement included), and closes done once it has
// seen all jobs.
type resolutionOrder struct {
	mu          sync.Mutex
	watch       fairway.JobRef
	others      int
	othersFirst int
	watchAt     time.Time
	seen        chan struct{}
	all         int
	done        chan struct{}
}

func newResolutionOrder(watch fairway.JobRef, all int) *resolutionOrder {
	return &resolutionOrder{watch: watch, all: all, othersFirst: -1, seen: make(chan struct{}), done: make(chan struct{})}
}

func (r *resolutionOrder) afterChange(applied []store.Applied) {
	r.mu.Lock()
	defer r.mu.Unlock()
	found := false
	for _, a := range applied {
		if a.Group == r.watch.Group && a.JobID == r.watch.ID {
			found = true
		} else {
			r.others++
		}
	}
	if found {
		r.othersFirst, r.watchAt = r.others, time.Now()
		close(r.seen)
	}
	if r.others+1 == r.all {
		close(r.done)
	}
}

func (r *resolutionOrder) wait(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	// What these tests assert is an order, not a speed: a whole backlog
	// (256,000 look-ups) may take long on a machine the other packages'
	// tests load.
	select {
	case <-ch:
	case <-time.After(5 * serviceWait):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestDependentsShareRoundsBetweenGroups: globex has 1,000 jobs queued for
// resolution, each with 256 dependencies (256,000 key look-ups), when
// acme's a ends, b waiting for it: b is resolved in the first rounds,
// after a slice of globex's work, not after all of it (one statement for
// everything queued resolved b with globex's 1,000). Nothing queued is
// lost: globex's jobs are all resolved.
func TestDependentsShareRoundsBetweenGroups(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.Open(t)
	var deps []string
	for i := range fairway.MaxDependencies {
		deps = append(deps, fmt.Sprintf("dep-%03d", i))
	}
	backlog := groupBacklog(t, st, "globex", 1000, deps...)
	storeJobs(t, st, fairway.Submission{Group: "acme", ID: "a"})
	storeJobs(t, st, fairway.Submission{Group: "acme", ID: "b", DependsOn: []string{"a"}})
	_, err := st.Cancel(ctx, "acme", "a")
	require.NoError(t, err)

	order := newResolutionOrder(fairway.JobRef{Group: "acme", ID: "b"}, len(backlog)+1)
	d := newDependents(dependentsConfig{}, storeBase(st, serviceLogger(t)), notLeading(t, st), order.afterChange)
	d.add(nil, backlog, false)
	d.add([]fairway.JobRef{{Group: "acme", ID: "a"}}, nil, false)
	start := time.Now()
	runService(t, d.run)
	order.wait(t, order.seen, "acme's b")
	order.wait(t, order.done, "globex's backlog")
	took := time.Since(start)
	t.Logf("acme's b resolved after %v and %d of globex's jobs; globex's %d after %v",
		order.watchAt.Sub(start), order.othersFirst, len(backlog), took)
	// A round takes at most ResolveGroupDepsDefault entries of a group,
	// and one job more: 9 of globex's. Two rounds at most before b's.
	perRound := store.ResolveGroupDepsDefault/fairway.MaxDependencies + 1
	require.LessOrEqual(t, order.othersFirst, 2*perRound)
	require.Equal(t, fairway.StateCancelled, jobState(t, st, "acme", "b"))
	require.Equal(t, fairway.StateCancelled, jobState(t, st, "globex", backlog[len(backlog)-1].ID))
}

// TestDependentsSweepIsFairBetweenGroups: the leader's sweep at start
// finds the resolutions that were lost (no end queued them) in every
// group at once, a slice of each in turn: zzz-small's one job is resolved
// in the first rounds, not after aaa-big's 1,500 that come before it in
// key order (a sweep in key order resolved 1,000 of them first).
func TestDependentsSweepIsFairBetweenGroups(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.Open(t)
	var deps []string
	for i := range 16 {
		deps = append(deps, fmt.Sprintf("dep-%02d", i))
	}
	backlog := groupBacklog(t, st, "aaa-big", 1500, deps...)
	storeJobs(t, st, fairway.Submission{Group: "zzz-small", ID: "a"})
	storeJobs(t, st, fairway.Submission{Group: "zzz-small", ID: "b", DependsOn: []string{"a"}})
	_, err := st.Cancel(ctx, "zzz-small", "a")
	require.NoError(t, err)

	order := newResolutionOrder(fairway.JobRef{Group: "zzz-small", ID: "b"}, len(backlog)+1)
	d := newDependents(dependentsConfig{}, storeBase(st, serviceLogger(t)), leading(t, st), order.afterChange)
	start := time.Now()
	runService(t, d.run)
	order.wait(t, order.seen, "zzz-small's b")
	order.wait(t, order.done, "aaa-big's backlog")
	t.Logf("zzz-small's b resolved by the sweep after %v and %d of aaa-big's jobs; aaa-big's %d after %v",
		order.watchAt.Sub(start), order.othersFirst, len(backlog), time.Since(start))
	require.LessOrEqual(t, order.othersFirst, 2*resolveGroupSlice)
	require.Equal(t, fairway.StateCancelled, jobState(t, st, "aaa-big", backlog[len(backlog)-1].ID))
}

// TestDependentsOfAHubAreSweptInSlices: a job with more dependents than
// a turn reads (DependentsLimit) ends: its group is swept instead, a
// slice at a time, on a coordinator that does not lead, and every
// dependent is resolved.
func TestDependentsOfAHubAreSweptInSlices(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	backlog := groupBacklog(t, st, "g", 50, "hub")
	f := newFollowUps()
	d := newDependents(dependentsConfig{DependentsLimit: 10, SweepBatch: 7}, storeBase(st, serviceLogger(t)), notLeading(t, st), f.afterChange)
	runService(t, d.run)
	d.add([]fairway.JobRef{{Group: "g", ID: "hub"}}, nil, false)
	for _, r := range backlog {
		require.Eventually(t, func() bool { return f.state(r.ID) == fairway.StateCancelled }, serviceWait, 10*time.Millisecond, r.ID)
	}
}

// TestDependentsSweepAGroupWhoseStatementFailed: a round whose statements
// fail (here, its context ended) loses nothing it had taken: the groups it
// had taken work from are swept, on a coordinator that does not lead, and
// the next rounds resolve it.
func TestDependentsSweepAGroupWhoseStatementFailed(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	backlog := groupBacklog(t, st, "g", 3, "a")
	f := newFollowUps()
	d := newDependents(dependentsConfig{}, storeBase(st, serviceLogger(t)), notLeading(t, st), f.afterChange)
	d.add([]fairway.JobRef{{Group: "g", ID: "a"}}, backlog[:1], false)
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	require.Error(t, d.round(ended))
	d.mu.Lock()
	require.True(t, d.groups["g"].sweeping, "the group is swept")
	d.mu.Unlock()
	for rounds := 0; f.state(backlog[2].ID) == ""; rounds++ {
		require.Less(t, rounds, 10)
		require.NoError(t, d.round(t.Context()))
	}
	for _, r := range backlog {
		require.Equal(t, fairway.StateCancelled, f.state(r.ID))
	}
}
