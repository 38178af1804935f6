package coordinator

import (
	"slices"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// TestLeaseSweeperReleasesLostJobs runs the lease sweeper alone, with a
// short lease, against an executor that went silent after it claimed a
// job: the journal's leader releases the job (a failed attempt, due
// again) and publishes its event, and the executor is marked gone.
func TestLeaseSweeperReleasesLostJobs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.Open(t)
	f := newFollowUps()
	e := startJournal(t, st, f, nil)
	const lease = 200 * time.Millisecond
	err := st.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 1, Tasks: []string{"t"}},
		func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	lost := storeJobs(t, e, fairway.Submission{Group: "g", ID: "lost"})[0]
	claimed, err := e.claim(ctx, store.ClaimParams{Executor: "w", Instance: "i1", ClaimID: fairway.NewID(), Limit: 1, Tasks: []string{"t"}, Lease: lease,
		Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, lost.ID, claimed[0].ID)

	start := time.Now()
	s := newLeaseSweeper(sweepConfig{Interval: 20 * time.Millisecond, Lease: lease}, storeBase(st, serviceLogger(t)), func() time.Time { return start })
	s.parts = partitions{e}
	require.Equal(t, 3*lease, s.cfg.GoneAfter, "gone after goneLeases leases by default")
	runService(t, s.run)

	require.Eventually(t, func() bool {
		return slices.Contains([]fairway.State{fairway.StateWaiting, fairway.StateStuck}, jobState(t, e, "g", "lost"))
	}, serviceWait, 10*time.Millisecond, "the lost job is due again after a failed attempt")
	require.Eventually(t, func() bool { return f.state("lost") == jobState(t, e, "g", "lost") }, serviceWait, 10*time.Millisecond, "its event is published")
	job, err := e.get(ctx, "g", "lost")
	require.NoError(t, err)
	require.Equal(t, 1, job.Retries, "the attempt lost counts")
	require.Eventually(t, func() bool {
		execs, err := st.Executors(ctx)
		return err == nil && slices.ContainsFunc(execs, func(e fairway.Executor) bool { return e.AppID == "w" && e.State == fairway.ExecutorGone })
	}, serviceWait, 10*time.Millisecond, "the silent executor is marked gone")
}

// TestExpiryGateWaitsALeaseAfterAPauseOrAnOutage: leases may be expired
// once PostgreSQL has answered for a lease (at once, for a sweeper that
// starts when it has already); a tick more than half a lease late (the
// process stood still, its heartbeats unrecorded) closes the gate for a
// lease, as PostgreSQL's being unreachable does; ticks on time do not.
func TestExpiryGateWaitsALeaseAfterAPauseOrAnOutage(t *testing.T) {
	cfg := sweepConfig{Interval: time.Second, Lease: 30 * time.Second}
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	require.True(t, newExpiryGate(cfg, at(-30), t0).open(t0), "PostgreSQL answered the lead for a lease before the sweeper started")
	require.False(t, newExpiryGate(cfg, at(-29), t0).open(t0))
	g := newExpiryGate(cfg, t0, t0)

	// On time, and late by up to half a lease: the gate opens a lease
	// after the start.
	for s := 1.0; s < 30; s++ {
		require.Zero(t, g.tick(at(s)), "tick at %vs", s)
		require.False(t, g.open(at(s)), "open at %vs, before a lease ran", s)
	}
	require.Zero(t, g.tick(at(45)), "a tick 15 s late (half a lease, not more) is no pause")
	require.True(t, g.open(at(45)))

	// Late by 19 s: the process stood still, the gate closes for a lease.
	require.Equal(t, 19*time.Second, g.tick(at(65)))
	require.False(t, g.open(at(65)))
	for s := 66.0; s < 95; s++ {
		require.Zero(t, g.tick(at(s)))
		require.False(t, g.open(at(s)), "open at %vs, a lease after the pause at 65 s", s)
	}
	require.Zero(t, g.tick(at(95)))
	require.True(t, g.open(at(95)))

	// PostgreSQL unreachable at 100 s: closed until 130 s.
	g.unreachable(at(100))
	require.False(t, g.open(at(129)))
	require.True(t, g.open(at(130)))
}
