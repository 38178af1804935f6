package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/executor"
	"github.com/stretchr/testify/require"
)

// TestProgressWithAnEstimate: a handler that counts its work (SetTotal,
// Advance) is seen by progress subscribers with an estimated end, and the
// job read meanwhile carries both; at its end the estimate is gone.
func TestProgressWithAnEstimate(t *testing.T) {
	t.Parallel()
	progressWithAnEstimate(t, setupRetrying(t))
}

// progressWithAnEstimate is TestProgressWithAnEstimate on h's engine.
func progressWithAnEstimate(t *testing.T, h *harness) {
	release := make(chan struct{})
	h.executor("ex1", 1, map[string]executor.Handler{"pages": func(_ context.Context, job *executor.Job) error {
		job.SetTotal(4)
		job.Advance(1)
		<-release
		job.Advance(3)
		return nil
	}})
	seen := make(chan fairway.Progress, 10)
	sub, err := h.client.SubscribeProgress("g", "", func(p fairway.Progress) { seen <- p })
	require.NoError(t, err)
	defer sub.Stop()
	id := submit(t, h, fairway.Submission{Group: "g", Task: "pages"})
	var p fairway.Progress
	for p.Progress != 25 {
		select {
		case p = <-seen:
		case <-time.After(waitTimeout):
			close(release)
			t.Fatal("no progress of 25% was published")
		}
	}
	require.Equal(t, id, p.JobID)
	require.Equal(t, "pages", p.Task)
	require.Equal(t, 1, p.Attempt)
	require.NotNil(t, p.EstimatedEnd, "a quarter done: an end to expect")
	require.True(t, p.EstimatedEnd.After(*p.Started))
	job, err := h.client.Get(t.Context(), "g", id)
	require.NoError(t, err)
	require.Equal(t, 25, job.Progress)
	require.NotNil(t, job.EstimatedEnd)
	close(release)
	evs := h.final(id)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)
	job, err = h.client.Get(t.Context(), "g", id)
	require.NoError(t, err)
	require.Equal(t, 100, job.Progress)
	require.Nil(t, job.EstimatedEnd)
	_, err = h.client.SubscribeProgress("a.b", "", func(fairway.Progress) {})
	require.ErrorIs(t, err, fairway.ErrInvalid)
}
