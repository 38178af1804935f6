package gcpace_test

import (
	"context"
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/gcpace"
	"github.com/stretchr/testify/require"
)

func TestPercentBoundsTheHeadroom(t *testing.T) {
	const mib = 1 << 20
	require.Equal(t, 100, gcpace.Percent(50*mib, 96*mib, 0), "a small heap is paced as Go's default")
	require.Equal(t, 100, gcpace.Percent(96*mib, 96*mib, 0))
	require.Equal(t, 50, gcpace.Percent(192*mib, 96*mib, 0), "twice the headroom: half the growth")
	require.Equal(t, 10, gcpace.Percent(10_000*mib, 96*mib, 0), "never below 10")
	require.Equal(t, 100, gcpace.Percent(10_000*mib, 0, 0), "0: off")
}

func TestPercentGrowsASmallHeapToTheFloor(t *testing.T) {
	const mib = 1 << 20
	require.Equal(t, 300, gcpace.Percent(64*mib, 64*mib, 256*mib), "a drain's heap grows to the floor")
	require.Equal(t, 1000, gcpace.Percent(10*mib, 64*mib, 256*mib), "a nearly empty heap: at most ten times itself")
	require.Equal(t, 100, gcpace.Percent(128*mib, 64*mib, 256*mib), "twice the live heap reaches the floor")
	require.Equal(t, 29, gcpace.Percent(220*mib, 64*mib, 256*mib), "a million waiting jobs: the headroom, as without a floor")
	require.Equal(t, 100, gcpace.Percent(0, 64*mib, 256*mib), "nothing measured yet")
}

// TestKeepPacesALargeHeap: with a live heap four times the headroom, Keep
// sets GOGC to about a quarter of Go's default, and puts it back when it
// ends.
func TestKeepPacesALargeHeap(t *testing.T) {
	t.Setenv("GOGC", "100") // restored after the test
	require.NoError(t, os.Unsetenv("GOGC"))
	held := make([]byte, 64<<20)
	runtime.GC()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); gcpace.Keep(ctx, 16<<20, 0, 10*time.Millisecond) }()
	require.Eventually(t, func() bool { return gogc() <= 30 }, 5*time.Second, 10*time.Millisecond,
		"GOGC was not lowered for a live heap of 64 MiB and a headroom of 16")
	cancel()
	<-done
	require.Equal(t, uint64(100), gogc(), "GOGC not put back")
	runtime.KeepAlive(held)
}

// gogc is the process's GOGC now.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
