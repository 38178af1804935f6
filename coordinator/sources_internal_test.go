package coordinator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSweepsAskedForCloseTogetherAreOne: sweeps asked for within a second
// of one another are one sweep, at the later time (a coordinator that
// starts and comes to lead asks twice); one asked for further apart is a
// sweep of its own, at its time.
func TestSweepsAskedForCloseTogetherAreOne(t *testing.T) {
	t.Parallel()
	s := &streamSources{sweepNow: make(chan struct{}, 1)}
	start := time.Now()
	s.sweepAfter(100 * time.Millisecond)
	s.sweepAfter(400 * time.Millisecond)
	s.sweepAfter(1600 * time.Millisecond)
	next := func() time.Duration {
		select {
		case <-s.sweepNow:
			return time.Since(start)
		case <-time.After(5 * time.Second):
			t.Fatal("no sweep asked for")
			return 0
		}
	}
	require.GreaterOrEqual(t, next(), 400*time.Millisecond, "the first two are one, at the later time")
	require.GreaterOrEqual(t, next(), 1600*time.Millisecond, "the third is its own, at its time")
}
