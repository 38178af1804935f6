package coordinator

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestSubmitPaceCountsBytes: a group that sends few, large submissions
// keeps a pace in bytes as well as in submissions. With 1,000 submissions
// a second but 4 MiB a second (burst 8 MiB), three submissions of 3 MiB
// each pass the count but not the bytes: the third waits for the bytes to
// refill, and another group is not held by it.
func TestSubmitPaceCountsBytes(t *testing.T) {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"quota"})
	q := newQuotas(0, 1000, 5000, 4<<20, 8<<20, refused)
	now := time.Unix(1_800_000_000, 0)
	q.now = func() time.Time { return now }
	const big = 3 << 20
	for i := range 3 {
		ok, wait := q.deferSubmits("acme", 1, big)
		require.True(t, ok, "submission %d: within the burst (it may go into debt)", i)
		require.Zero(t, wait)
	}
	ok, wait := q.deferSubmits("acme", 1, big)
	require.False(t, ok, "a fourth 3 MiB submission at once: over the byte pace")
	// 9 MiB taken from 8: 1 MiB of debt and a byte to go, at 4 MiB/s.
	require.InDelta(t, 250*time.Millisecond, wait, float64(time.Millisecond))
	ok, _ = q.deferSubmits("globex", 1, big)
	require.True(t, ok, "another group has its own bucket")
	now = now.Add(wait + time.Millisecond)
	ok, _ = q.deferSubmits("acme", 1, big)
	require.True(t, ok, "once refilled")

	// Small submissions are paced by their count as before.
	q = newQuotas(0, 10, 10, 4<<20, 8<<20, refused)
	q.now = func() time.Time { return now }
	for range 10 {
		ok, _ := q.deferSubmits("acme", 1, 100)
		require.True(t, ok)
	}
	ok, wait = q.deferSubmits("acme", 1, 100)
	require.False(t, ok)
	require.InDelta(t, 100*time.Millisecond, wait, float64(time.Millisecond))
}
