package coordinator_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/stretchr/testify/require"
)

// TestANewJobGoesToTheIdleExecutorNotBehindALongOne: an executor of one
// slot has run many short jobs (so it holds jobs beyond its slot) and now
// runs a long one; a second executor has two free slots. A new job is
// handed to the idle executor and runs there, never held behind the long
// job (it used to be handed to the busy executor's prefetch and wait
// there while the other stayed idle).
func TestANewJobGoesToTheIdleExecutorNotBehindALongOne(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := t.Context()
	longStarted := make(chan struct{}, 1)
	busy := h.newExecutor(executor.Config{AppID: "busy", PoolSize: 1})
	busy.Handle("work", func(ctx context.Context, job *executor.Job) error {
		if string(job.Args) == `{"kind":"long"}` {
			longStarted <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	require.NoError(t, busy.Start(ctx))
	short := make([]fairway.Submission, 50)
	for i := range short {
		short[i] = fairway.Submission{Group: "acme", Task: "work", Args: json.RawMessage(`{"kind":"short"}`)}
	}
	ids, err := h.client.SubmitMany(ctx, short)
	require.NoError(t, err)
	succeeded := map[string]bool{}
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateSuccess {
			succeeded[ev.JobID] = true
		}
		return len(succeeded) == len(ids)
	})

	submit(t, h, fairway.Submission{Group: "acme", Task: "work", Args: json.RawMessage(`{"kind":"long"}`)})
	select {
	case <-longStarted:
	case <-ctx.Done():
		t.Fatal("the long job never started")
	}
	h.executor("idle", 2, map[string]executor.Handler{"work": func(context.Context, *executor.Job) error { return nil }})

	id := submit(t, h, fairway.Submission{Group: "acme", Task: "work", Args: json.RawMessage(`{"kind":"short"}`)})
	evs := h.final(id)
	require.Equal(t, []string{">waiting", "waiting>scheduled", "scheduled>running", "running>success"}, transitions(evs))
	require.Equal(t, "idle", evs[1].Executor, "handed to the executor with free slots")
}
