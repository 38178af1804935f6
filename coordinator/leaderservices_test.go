package coordinator

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// serviceProbe is a leader-only service that says whether it runs.
type serviceProbe struct {
	running, starts atomic.Int32
	started         chan struct{}
}

func newServiceProbe() *serviceProbe { return &serviceProbe{started: make(chan struct{}, 10)} }

func (p *serviceProbe) run(ctx context.Context) {
	p.running.Add(1)
	p.starts.Add(1)
	p.started <- struct{}{}
	<-ctx.Done()
	p.running.Add(-1)
}

func (p *serviceProbe) awaitStart(t *testing.T) {
	t.Helper()
	select {
	case <-p.started:
	case <-time.After(serviceWait):
		t.Fatal("the leader-only service did not start")
	}
}

// TestLeaderServicesRunOnlyWhileLeading: of two coordinators' leaderships
// on one database, the one that takes the lead starts its leader-only
// services and the other does not; when the lead moves, the deposed
// leader's services have returned by the time its try does, and the new
// leader's start; a leader that stops stops its services before it gives
// the lead up.
func TestLeaderServicesRunOnlyWhileLeading(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.Open(t)
	probeA, probeB := newServiceProbe(), newServiceProbe()
	a := &leadership{store: st, holder: fairway.NewID(), log: serviceLogger(t), services: &leaderServices{loops: []func(context.Context){probeA.run}}}
	b := &leadership{store: st, holder: fairway.NewID(), log: serviceLogger(t), services: &leaderServices{loops: []func(context.Context){probeB.run}}}

	a.try(ctx)
	require.True(t, a.leads.Load())
	probeA.awaitStart(t)
	b.try(ctx)
	require.False(t, b.leads.Load())
	a.try(ctx) // a renewal starts nothing again
	require.EqualValues(t, 1, probeA.starts.Load())
	require.EqualValues(t, 0, probeB.starts.Load(), "a coordinator that does not lead runs no leader service")

	// The lead moves to b (a's lease given up, as when a stalls past it).
	require.NoError(t, st.ReleaseMaintenance(ctx, a.holder))
	b.try(ctx)
	require.True(t, b.leads.Load())
	probeB.awaitStart(t)
	a.try(ctx)
	require.False(t, a.leads.Load())
	require.EqualValues(t, 0, probeA.running.Load(), "the deposed leader's services returned before its try did")

	// b stops: its services return, then it gives the lead up, which a takes.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.run(runCtx)
	}()
	cancel()
	<-done
	require.EqualValues(t, 0, probeB.running.Load())
	a.try(ctx)
	require.True(t, a.leads.Load(), "b gave the lead up as it stopped")
	probeA.awaitStart(t)
	require.EqualValues(t, 2, probeA.starts.Load())
}
