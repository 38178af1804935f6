package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/fairwayhq/fairway/internal/storetest"
	public "github.com/fairwayhq/fairway/store"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// runLog records when each job's handler ran, by group and task.
type runLog struct {
	mu   sync.Mutex
	runs []run
}

type run struct {
	group, task string
	start, end  time.Time
}

// handler sleeps the args' ms, then records its run.
func (l *runLog) handler(ctx context.Context, job *executor.Job) error {
	var args struct{ MS int }
	if err := json.Unmarshal(job.Args, &args); err != nil {
		return err
	}
	start := time.Now()
	select {
	case <-time.After(time.Duration(args.MS) * time.Millisecond):
	case <-ctx.Done():
	}
	l.mu.Lock()
	l.runs = append(l.runs, run{job.Group, job.Task, start, time.Now()})
	l.mu.Unlock()
	return nil
}

// slotTime is each group's slot-time within [from, to).
func (l *runLog) slotTime(from, to time.Time) map[string]time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]time.Duration{}
	for _, r := range l.runs {
		s, e := max(r.start.UnixNano(), from.UnixNano()), min(r.end.UnixNano(), to.UnixNano())
		if e > s {
			out[r.group] += time.Duration(e - s)
		}
	}
	return out
}

// starts counts the runs of task that started within [from, to).
func (l *runLog) starts(task string, from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.runs {
		if r.task == task && !r.start.Before(from) && r.start.Before(to) {
			n++
		}
	}
	return n
}

func submitSleeps(t *testing.T, c *events.Client, group, task string, ms, n int) {
	t.Helper()
	args := json.RawMessage(fmt.Sprintf(`{"ms":%d}`, ms))
	for n > 0 {
		batch := min(n, 500)
		subs := make([]fairway.Submission, batch)
		for i := range subs {
			subs[i] = fairway.Submission{Group: group, Task: task, Args: args}
		}
		_, err := c.SubmitMany(t.Context(), subs)
		require.NoError(t, err)
		n -= batch
	}
}

// TestSharesOfSlotTimeEndToEnd: with scheduler.fairness time, two groups
// whose jobs run 100 ms and 10 ms, both backlogged on 10 slots, get half
// the slot-time each (counting jobs would give about 91% and 9%); with
// weights 3 and 1 (set through the operator API), 75% and 25%. Measured by
// the handlers over a window after the run times are learned.
func TestSharesOfSlotTimeEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name       string
		weightA    float64
		wantA      float64
		partitions int
	}{
		{"equal weights", 1, 0.5, 1},
		{"weights 3 and 1", 3, 0.75, 1},
		// a and b on partitions of their own: the executor's slots spread
		// over the partitions by what their replies are expected to run.
		{"weights 3 and 1 on two partitions", 3, 0.75, 2},
	} {
		{
			t.Run(tc.name, func(t *testing.T) {
				retries := 0
				cfg := coordinator.Config{Fairness: coordinator.FairnessTime, Retries: &retries}
				var h *harness
				if tc.partitions > 1 {
					require.NotEqual(t, partition.Of("a", tc.partitions), partition.Of("b", tc.partitions))
					st := storetest.Open(t)
					cfg.PartitionStores = []*public.Store{storetest.Public(st), storetest.Public(st)}
					h, _ = setupOn(t, st, cfg)
				} else {
					h, _ = setupWith(t, cfg)
				}
				if tc.weightA != 1 {
					_, err := h.client.SetWeight(t.Context(), "a", tc.weightA)
					require.NoError(t, err)
				}
				var log runLog
				ex := h.newExecutor(executor.Config{AppID: "w", PoolSize: 10})
				ex.Handle("sleep", log.handler)
				require.NoError(t, ex.Start(t.Context()))
				const warm, window = 2 * time.Second, 6 * time.Second
				// More than either group can run in the whole test.
				submitSleeps(t, h.client, "a", "sleep", 100, 1000)
				submitSleeps(t, h.client, "b", "sleep", 10, 8000)
				start := time.Now()
				from, to := start.Add(warm), start.Add(warm+window)
				time.Sleep(time.Until(to)) // the window is measured in real time
				used := log.slotTime(from, to)
				total := used["a"] + used["b"]
				shareA := float64(used["a"]) / float64(total)
				busy := float64(total) / float64(10*window)
				t.Logf("a %.1f%% of the slot-time (want %.0f%%), b %.1f%%; slots busy %.0f%%", 100*shareA, 100*tc.wantA, 100*(1-shareA), 100*busy)
				require.InDelta(t, tc.wantA, shareA, 0.05)
				shares, err := h.client.Groups(t.Context(), "1m")
				require.NoError(t, err)
				require.Len(t, shares, 2)
				t.Logf("groups: %+v", shares)
				require.InDelta(t, tc.wantA, shares[0].FairShare, 0.001, "a's weighted fair share")
			})
		}
	}
}

// TestRateLimitAcrossCoordinators: a rate limit of 20 starts a second of a
// task holds over 30 s with three coordinators claiming (never above it;
// within 5% of it on a quiet machine), while another task's jobs use
// every free slot.
func TestRateLimitAcrossCoordinators(t *testing.T) {
	ns, nc := natstest.Start(t)
	st := storetest.Open(t)
	retries := 0
	for range 3 {
		cnc, err := nats.Connect(ns.ClientURL())
		require.NoError(t, err)
		t.Cleanup(cnc.Close)
		coord, err := coordinator.New(storetest.Public(st), cnc, coordinator.Config{Retries: &retries, Logger: testLogger(t)})
		require.NoError(t, err)
		require.NoError(t, coord.Start(t.Context()))
		t.Cleanup(coord.Stop)
	}
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	h := &harness{t: t, ns: ns, nc: nc, store: st, client: client}
	_, err = client.SetRateLimit(t.Context(), "task:mail", "20/s")
	require.NoError(t, err)
	var log runLog
	for i := range 2 {
		ex := h.newExecutor(executor.Config{AppID: fmt.Sprintf("w%d", i), PoolSize: 5})
		ex.Handle("mail", log.handler)
		ex.Handle("other", log.handler)
		require.NoError(t, ex.Start(t.Context()))
	}
	// The claims of mail jobs, beside their starts: when the starts fall
	// short, the log says whether the limiter or the executors held them.
	var stored, claimed, released atomic.Int64
	sub, err := client.Subscribe(t.Context(), events.Filter{Task: "mail"}, func(ev events.Event) {
		switch ev.State {
		case fairway.StateScheduled:
			claimed.Add(1)
		case fairway.StateWaiting:
			if ev.PreviousState != "" {
				released.Add(1)
			} else {
				stored.Add(1)
			}
		}
	})
	require.NoError(t, err)
	t.Cleanup(sub.Stop)
	const window = 30 * time.Second
	submitSleeps(t, client, "g", "mail", 1, 1000)
	submitSleeps(t, client, "g", "other", 100, 4000)
	start := time.Now()
	time.Sleep(window)
	mails := log.starts("mail", start, start.Add(window))
	busy := float64(log.slotTime(start.Add(time.Second), start.Add(window))["g"]) / float64(10*(window-time.Second))
	// A full bucket of 20 at the start, then 20 a second.
	want := 20 + 20*window.Seconds()
	t.Logf("%d mail jobs started in %s (want %.0f ±5%%), %d stored of 1000 and %d claimed (events, the window and a little after), %d back to waiting; the slots were busy %.1f%% of the time",
		mails, window, want, stored.Load(), claimed.Load(), released.Load(), 100*busy)
	// Never more, whatever the load: the buckets are counted under the
	// fairness lock. Fewer when the machine starves the claims (a bucket
	// that nobody takes from for over a second fills up and stops): on a
	// quiet machine 617-619 of 620, 565-615 beside busy loops and synced
	// writes; CI's heaviest hour gave 512, and once 300 with the slots 95%
	// busy (not reproduced here; the claims logged above say where the next
	// one goes). The bound below catches what starves the task for good (a
	// bucket never refilled gives 20 starts, a task passed over for ever 0).
	// Once 96 (2026-12-02, beside the journal's tests; not reproduced in
	// ten runs since, alone or so): the stored count logged above says
	// whether ingest or the claims held the rest back.
	require.LessOrEqual(t, float64(mails), 1.05*want, "the rate limit was exceeded")
	require.GreaterOrEqual(t, float64(mails), 0.4*want, "the rate-limited task was starved")
	// 93-95% on a quiet machine (the executors' own round trips); 89% under load.
	require.Greater(t, busy, 0.8, "slots left idle while other jobs waited")
}
