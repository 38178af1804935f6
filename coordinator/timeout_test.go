package coordinator_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/stretchr/testify/require"
)

// TestTimeouts: a job's own timeout cancels its handler's context at the
// deadline and the attempt fails with a timeout error, retried as usual;
// a task's default timeout applies to jobs without one; a handler that
// ignores its context is not waited for: after the grace its attempt
// fails and its slot is free for the next job.
func TestTimeouts(t *testing.T) {
	t.Parallel()
	h := setup(t)
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	ex := h.newExecutor(executor.Config{AppID: "ex1", PoolSize: 1,
		Timeouts: map[string]time.Duration{"ignores": 300 * time.Millisecond}, TimeoutGrace: 200 * time.Millisecond})
	ex.Handle("waits", func(ctx context.Context, _ *executor.Job) error {
		<-ctx.Done()
		return ctx.Err()
	})
	ex.Handle("ignores", func(context.Context, *executor.Job) error {
		<-stuck // ignores its context
		return nil
	})
	ex.Handle("echo", echo)
	require.NoError(t, ex.Start(t.Context()))

	// Its own timeout, 1 s, one retry: two attempts, both timed out.
	one := 1
	reply, err := h.client.SubmitReply(t.Context(), fairway.Submission{Group: "g", Task: "waits", Timeout: "1s", MaxRetries: &one})
	require.NoError(t, err)
	require.Equal(t, "1s", reply.Job.Timeout)
	evs := h.final(reply.ID)
	last := evs[len(evs)-1]
	require.Equal(t, fairway.StateFailed, last.State)
	require.Equal(t, 2, last.Attempt)
	require.Contains(t, last.Error, "timeout: the attempt ran longer than 1s")
	require.Contains(t, transitions(evs), "running>stuck", "the first attempt was retried")

	// The task's default: the handler ignores its context, and the next
	// job still gets the one slot.
	zero := 0
	ignored := submit(t, h, fairway.Submission{Group: "g", Task: "ignores", MaxRetries: &zero})
	next := submit(t, h, fairway.Submission{Group: "g", Task: "echo"})
	seen := map[string]events.Event{}
	h.until(func(ev events.Event) bool {
		if ev.State.Final() {
			seen[ev.JobID] = ev
		}
		return len(seen) == 2
	})
	require.Equal(t, fairway.StateFailed, seen[ignored].State)
	require.Contains(t, seen[ignored].Error, "timeout: the attempt ran longer than 300ms")
	require.Equal(t, fairway.StateSuccess, seen[next].State, "the abandoned handler's slot was freed")
}

// TestSnooze: a handler that returns fairway.Snooze(d) puts its job back
// to waiting, due after d; the attempt counts no failure, and the job runs
// again then.
func TestSnooze(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var first atomic.Int64 // when the first attempt snoozed, in Unix ns
	h.executor("ex1", 1, map[string]executor.Handler{"later": func(_ context.Context, job *executor.Job) error {
		if job.Attempt == 1 {
			first.Store(time.Now().UnixNano())
			return fairway.Snooze(time.Second)
		}
		if since := time.Since(time.Unix(0, first.Load())); since < 900*time.Millisecond {
			return fmt.Errorf("ran again after %s, before its snooze of 1s", since)
		}
		return nil
	}})
	zero := 0
	id := submit(t, h, fairway.Submission{Group: "g", Task: "later", MaxRetries: &zero})
	evs := h.final(id)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State, "no retries were allowed: the snooze was no failure")
	require.Contains(t, transitions(evs), "running>waiting")
	job, err := h.client.Get(t.Context(), "g", id)
	require.NoError(t, err)
	require.Equal(t, 0, job.Retries)
	require.Equal(t, 2, job.Attempt)
}
