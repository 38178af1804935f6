package coordinator_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/stretchr/testify/require"
)

// TestRetentionPrunesFinishedJobs: a coordinator prunes finished jobs past
// their state's retention on its own, and keeps the others: waiting ones
// always, and successes whose retention is "for ever".
func TestRetentionPrunesFinishedJobs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// Cancelled jobs are kept 300 ms: the cancel's answer reads the job
	// back after its record is written, and a retention of 1 ms let a
	// prune take it first once in CI ("job not found").
	h, _ := setupWith(t, coordinator.Config{Retention: coordinator.Retention{Cancelled: 300 * time.Millisecond, Success: -1, Interval: time.Second}})
	client := h.client

	cancelled, err := client.SubmitWait(ctx, fairway.Submission{Group: "g", Task: "echo", ID: "cancelled"})
	require.NoError(t, err)
	_, err = client.Cancel(ctx, "g", cancelled.ID)
	require.NoError(t, err)
	_, err = client.SubmitWait(ctx, fairway.Submission{Group: "g", Task: "echo", ID: "waits"})
	require.NoError(t, err)

	// Pruning has no event of its own: look until the job is gone (the
	// loop runs every second).
	require.Eventually(t, func() bool {
		_, err := client.Get(ctx, "g", "cancelled")
		return err != nil
	}, waitTimeout, 50*time.Millisecond, "the cancelled job is pruned")
	job, err := client.Get(ctx, "g", "waits")
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State)

	// Operators prune on request too (the verb is operators only, like executors).
	n, err := client.Prune(ctx, events.PruneRequest{State: fairway.StateSuccess, OlderThan: "0s"})
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = client.Prune(ctx, events.PruneRequest{State: fairway.StateSuccess, OlderThan: "soon"})
	require.ErrorContains(t, err, `"soon" is not a duration`)
}
