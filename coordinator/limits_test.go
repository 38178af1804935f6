package coordinator_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/nats-io/nats.go"
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
	ex.Handle("slow", gated(gate, &running, &peak), executor.MaxConcurrent(1))
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

// TestARequestLeavingACappedTaskOutDoesNotWait: while the executor's task
// "slow" is at its max-concurrent, its dispatch requests leave the task
// out and do not long-poll (wait_ms 0): a request parked for the other
// tasks would hold the loop a second after the slow job ends, and the
// next slow job would start that much later. Once the slow job ended, the
// next request asks for "slow" again and gets its next job.
func TestARequestLeavingACappedTaskOutDoesNotWait(t *testing.T) {
	t.Parallel()
	h := setup(t)
	// The executor's requests, as the coordinators receive them.
	requests := make(chan events.DispatchRequest, 1000)
	sub, err := h.nc.Subscribe("fairway.exec.ex1.dispatch", func(m *nats.Msg) {
		var req events.DispatchRequest
		if json.Unmarshal(m.Data, &req) == nil && !req.Stopping {
			select {
			case requests <- req:
			default:
			}
		}
	})
	require.NoError(t, err)
	require.NoError(t, h.nc.Flush())

	gate := make(chan struct{})
	ex := h.newExecutor(executor.Config{AppID: "ex1", PoolSize: 4})
	ex.Handle("slow", func(ctx context.Context, _ *executor.Job) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, executor.MaxConcurrent(1))
	ex.Handle("quick", echo)
	require.NoError(t, ex.Start(t.Context()))
	first := submit(t, h, fairway.Submission{Group: "g", Task: "slow"})
	second := submit(t, h, fairway.Submission{Group: "g", Task: "slow"})
	h.until(func(ev events.Event) bool { return ev.JobID == first && ev.State == fairway.StateRunning })

	// A request sent while "slow" runs at its cap leaves it out, without
	// waiting at the leader.
	deadline := time.After(time.Minute)
	for capped := false; !capped; {
		select {
		case req := <-requests:
			if !slices.Contains(req.Tasks, "slow") {
				require.Zero(t, req.WaitMS, "a request that leaves the capped task out does not long-poll: %+v", req)
				capped = true
			}
		case <-deadline:
			t.Fatal("no dispatch request left the capped task out")
		}
	}
	gate <- struct{}{}
	h.until(func(ev events.Event) bool { return ev.JobID == second && ev.State == fairway.StateRunning })
	close(gate)
	require.NoError(t, sub.Unsubscribe())
	for len(requests) > 0 {
		req := <-requests
		if !slices.Contains(req.Tasks, "slow") {
			require.Zero(t, req.WaitMS, "%+v", req)
		}
	}
}

// gated is a handler that counts its jobs running (and the most at
// once, peak) and ends each when gate gives it a value or closes.
func gated(gate <-chan struct{}, running, peak *atomic.Int32) executor.Handler {
	return func(ctx context.Context, _ *executor.Job) error {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
