package coordinator_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/stretchr/testify/require"
)

// TestLimitsNeverStrandSlots: an executor with four slots runs at most one
// job of "slow" at a time (its max-concurrent); its other slots take the
// "quick" jobs submitted after the slow ones, instead of idling. A
// cluster-wide limit of 0 then stops new slow jobs while quick ones still
// run; raising it lets them run again, removing it too.
func TestLimitsNeverStrandSlots(t *testing.T) {
	t.Parallel()
	h := setup(t)
	gate := make(chan struct{})
	var running, peak atomic.Int32
	ex := h.newExecutor(executor.Config{AppID: "ex1", PoolSize: 4})
	ex.Handle("slow", func(ctx context.Context, _ *executor.Job) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			if p := peak.Load(); n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, executor.MaxConcurrent(1))
	ex.Handle("quick", echo)
	require.NoError(t, ex.Start(t.Context()))

	var slow []string
	for range 3 {
		slow = append(slow, submit(t, h, fairway.Submission{Group: "g", Task: "slow"}))
	}
	quick := map[string]bool{}
	for range 3 {
		quick[submit(t, h, fairway.Submission{Group: "g", Task: "quick"})] = true
	}
	// The three quick jobs end while the first slow one holds its slot.
	h.until(func(ev events.Event) bool {
		if quick[ev.JobID] && ev.State == fairway.StateSuccess {
			delete(quick, ev.JobID)
		}
		return len(quick) == 0
	})
	require.Equal(t, int32(1), running.Load())
	waiting := 0
	for _, id := range slow {
		j, err := h.client.Get(t.Context(), "g", id)
		require.NoError(t, err)
		if j.State == fairway.StateWaiting {
			waiting++
		}
	}
	require.Equal(t, 2, waiting, "one slow job runs, two wait for the executor's cap")

	// Cluster-wide: no new slow job at all, while quick ones go on.
	limits, err := h.client.SetLimit(t.Context(), "task", "slow", 0)
	require.NoError(t, err)
	require.Equal(t, []fairway.Limit{{Kind: "task", Name: "slow", Max: 0, Held: 1, Updated: limits[0].Updated}}, limits)
	gate <- struct{}{} // the running slow job ends
	q := submit(t, h, fairway.Submission{Group: "g", Task: "quick"})
	endedSlow := 0
	h.until(func(ev events.Event) bool {
		if ev.Task == "slow" && ev.State == fairway.StateSuccess {
			endedSlow++
		}
		return ev.JobID == q && ev.State == fairway.StateSuccess
	})
	require.Equal(t, 1, endedSlow)
	require.Zero(t, running.Load(), "the limit of 0 keeps the slow jobs waiting")

	// Raised: they run again, one at a time on this executor.
	_, err = h.client.SetLimit(t.Context(), "task", "slow", 5)
	require.NoError(t, err)
	h.until(func(ev events.Event) bool { return ev.Task == "slow" && ev.State == fairway.StateRunning })
	_, err = h.client.DeleteLimit(t.Context(), "task", "slow")
	require.NoError(t, err)
	close(gate)
	h.until(func(ev events.Event) bool {
		if ev.Task == "slow" && ev.State == fairway.StateSuccess {
			endedSlow++
		}
		return endedSlow == 3
	})
	require.Equal(t, int32(1), peak.Load(), "never two slow jobs at once on an executor whose max-concurrent is 1")

	limits, err = h.client.Limits(t.Context())
	require.NoError(t, err)
	require.Empty(t, limits)
	_, err = h.client.SetLimit(t.Context(), "queue", "slow", 1)
	requireInvalid(t, err, "kind", `unknown kind "queue"`)
	_, err = h.client.DeleteLimit(t.Context(), "task", "slow")
	require.ErrorIs(t, err, fairway.ErrNotFound)
}
