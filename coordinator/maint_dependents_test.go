package coordinator

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/fairwayhq/fairway/store"
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
	d := newDependents(dependentsConfig{}, st, serviceLogger(t), notLeading(t, st), f.afterChange)
	require.Equal(t, blockedSweepInterval, d.cfg.SweepInterval)
	runService(t, d.run)
	d.queueStored(stored)
	require.Eventually(t, func() bool { return f.state("after-b") == fairway.StateCancelled }, serviceWait, 10*time.Millisecond,
		"a job stored with a dependency cancelled already is cancelled")
	require.Equal(t, fairway.StateCancelled, jobState(t, st, "g", "after-b"))

	// a succeeds, and its change is queued as afterChange queues it.
	_, err = st.Claim(ctx, store.ClaimParams{Worker: "w", Limit: 2, Tasks: []string{"t"}, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	job, err := st.Get(ctx, "g", "a")
	require.NoError(t, err)
	at := store.Attempt{Group: "g", JobID: "a", Attempt: job.Attempt, Worker: "w"}
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
	d := newDependents(dependentsConfig{SweepBatch: 1}, st, serviceLogger(t), leading(t, st), f.afterChange)
	runService(t, d.run)
	require.Eventually(t, func() bool { return f.state("after-a") == fairway.StateCancelled }, serviceWait, 10*time.Millisecond,
		"the sweep cancels the dependent of a cancelled job")
	require.Equal(t, fairway.StateCancelled, jobState(t, st, "g", "after-a"))
}
