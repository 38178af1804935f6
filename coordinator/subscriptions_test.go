package coordinator_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/devtest"
	"github.com/stretchr/testify/require"
)

// TestRunTimeSubscriptions: an executor that runs takes a new task
// (Handle after Start: a job of it is refused before and runs after),
// drops one (Unhandle: a job of it waits while a later job of another task
// runs on the one slot), is paused and resumed for one task by an operator
// (the pause verb), and runs more jobs at once after SetConcurrency.
func TestRunTimeSubscriptions(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := t.Context()
	// The executor's log tells when it heard an operator's pause.
	exLog := &devtest.Output{}
	ex := h.newExecutor(executor.Config{AppID: "ex1", PoolSize: 1, Logger: slog.New(slog.NewTextHandler(exLog, nil))})
	ex.Handle("a", echo)
	require.NoError(t, ex.Start(ctx))
	stored := func(task string) string {
		t.Helper()
		reply, err := h.client.SubmitReply(ctx, fairway.Submission{Group: "g", Task: task})
		require.NoError(t, err)
		return reply.ID
	}
	// waitsWhile waits for later's success and checks that first is
	// still waiting then (one slot, older first: a claimable first would
	// have run before later).
	waitsWhile := func(first, later string) {
		t.Helper()
		evs := h.final(later)
		require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)
		job, err := h.client.Get(ctx, "g", first)
		require.NoError(t, err)
		require.Equal(t, fairway.StateWaiting, job.State, "job %s of a task the executor does not take now was claimed", first)
	}

	_, err := h.client.SubmitReply(ctx, fairway.Submission{Group: "g", Task: "b"})
	require.ErrorIs(t, err, fairway.ErrInvalid, "no executor runs b yet")
	ex.Handle("b", echo)
	evs := h.final(stored("b"))
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State, "b is taken once handled")

	// A held job of a, released once a is dropped (a new one would be
	// refused: no executor runs a then).
	held, err := h.client.SubmitReply(ctx, fairway.Submission{Group: "g", Task: "a", Pending: true})
	require.NoError(t, err)
	dropped := held.ID
	ex.Unhandle("a")
	_, err = h.client.Release(ctx, "g", dropped)
	require.NoError(t, err)
	waitsWhile(dropped, stored("b"))
	ex.Handle("a", echo)
	evs = h.final(dropped)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State, "a is taken again")

	require.NoError(t, h.client.Pause(ctx, events.PauseCommand{Executor: "ex1", Task: "a"}))
	// The command reaches the executor on its own subject: wait for it.
	exLog.Wait(t, "paused: no new jobs of task a", waitTimeout)
	_, paused := ex.Paused()
	require.Equal(t, []string{"a"}, paused)
	pausedJob := stored("a")
	waitsWhile(pausedJob, stored("b"))
	require.NoError(t, h.client.Pause(ctx, events.PauseCommand{Executor: "ex1", Task: "a", Resume: true}))
	// Resumed: a waiting job of a runs (no wait on the executor's state
	// needed: the job ends only once it has heard).
	evs = h.final(pausedJob)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)
	require.ErrorIs(t, h.client.Pause(ctx, events.PauseCommand{Executor: "nobody"}), fairway.ErrNotFound)

	// Three slots: three blocking jobs run at once.
	release := make(chan struct{})
	started := make(chan string, 3)
	ex.Handle("block", func(_ context.Context, job *executor.Job) error {
		started <- job.ID
		<-release
		return nil
	})
	require.NoError(t, ex.SetConcurrency(3))
	for range 3 {
		stored("block")
	}
	for range 3 {
		select {
		case <-started:
		case <-time.After(waitTimeout):
			t.Fatal("three jobs did not run at once with three slots")
		}
	}
	close(release)
	require.ErrorIs(t, ex.SetConcurrency(0), fairway.ErrInvalid)
}
