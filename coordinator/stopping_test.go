package coordinator_test

import (
	"context"
	"slices"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/stretchr/testify/require"
)

// TestAStoppingExecutorIsHandedNoJobAndCountsNoAttempt: an executor runs
// two jobs with a slot free (its dispatch request parked at the leader)
// and shuts down without waiting for them. The jobs it releases are not
// handed back to it, count no attempt, and their events say what
// happened; another executor then runs them as their first attempt.
// Before, the leader handed each released job straight to the stopping
// executor's parked request, which released it again: attempt 2, and an
// error saying only that the executor was shutting down.
func TestAStoppingExecutorIsHandedNoJobAndCountsNoAttempt(t *testing.T) {
	t.Parallel()
	h := setup(t)
	started := make(chan string, 2)
	leaving := h.newExecutor(executor.Config{AppID: "leaving", PoolSize: 3})
	leaving.Handle("long", func(ctx context.Context, job *executor.Job) error {
		started <- job.ID
		<-ctx.Done()
		return ctx.Err()
	})
	require.NoError(t, leaving.Start(t.Context()))
	ids, err := h.client.SubmitMany(t.Context(), []fairway.Submission{{Group: "acme", Task: "long"}, {Group: "acme", Task: "long"}})
	require.NoError(t, err)
	recv := func(what string) string {
		select {
		case id := <-started:
			return id
		case <-t.Context().Done():
			t.Fatalf("%s: the test ended first", what)
		}
		return ""
	}
	recv("the first job to start")
	recv("the second job to start")

	ctx, cancel := context.WithCancel(t.Context())
	cancel() // release the running jobs at once
	require.ErrorIs(t, leaving.Shutdown(ctx), executor.ErrJobsReleased)

	// Each job: released to waiting with its attempt given back.
	byJob := map[string][]events.Event{}
	released := func(evs []events.Event) bool {
		return slices.ContainsFunc(evs, func(ev events.Event) bool { return ev.State == fairway.StateWaiting && ev.PreviousState != "" })
	}
	h.until(func(ev events.Event) bool {
		byJob[ev.JobID] = append(byJob[ev.JobID], ev)
		return released(byJob[ids[0]]) && released(byJob[ids[1]])
	})
	for _, id := range ids {
		ev := byJob[id][len(byJob[id])-1]
		require.Equal(t, fairway.StateWaiting, ev.State, "job %s: %v", id, transitions(byJob[id]))
		require.Equal(t, fairway.StateRunning, ev.PreviousState, "job %s", id)
		require.Equal(t, "released while it ran: the executor shut down before the job finished", ev.Error)
		require.Zero(t, ev.Attempt, "a job released by a stopping executor counts no attempt")
		job, err := h.client.Get(t.Context(), "acme", id)
		require.NoError(t, err)
		require.Equal(t, fairway.StateWaiting, job.State)
		require.Zero(t, job.Attempt)
		require.Zero(t, job.Retries)
	}

	// Another executor runs them, each as its first attempt; the stopping
	// one was never handed them again.
	h.executor("next", 2, map[string]executor.Handler{"long": func(context.Context, *executor.Job) error { return nil }})
	h.until(func(ev events.Event) bool {
		byJob[ev.JobID] = append(byJob[ev.JobID], ev)
		final := func(evs []events.Event) bool { return evs[len(evs)-1].State.Final() }
		return final(byJob[ids[0]]) && final(byJob[ids[1]])
	})
	for _, id := range ids {
		evs := byJob[id]
		require.Equal(t, []string{">waiting", "waiting>scheduled", "scheduled>running", "running>waiting",
			"waiting>scheduled", "scheduled>running", "running>success"}, transitions(evs), "job %s", id)
		var handedTo []string
		for _, ev := range evs {
			if ev.State == fairway.StateScheduled {
				handedTo = append(handedTo, ev.Executor)
				require.Equal(t, 1, ev.Attempt, "job %s", id)
			}
		}
		require.Equal(t, []string{"leaving", "next"}, handedTo, "job %s", id)
		require.Equal(t, 1, evs[len(evs)-1].Attempt, "job %s ran as its first attempt", id)
	}
}
