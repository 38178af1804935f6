package cli_test

import (
	"fmt"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

// TestJobsPrune: `jobs prune` removes the finished jobs of the states asked
// for, batch by batch, and leaves the others.
func TestJobsPrune(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()
	for i := range 5 {
		job, err := c.client.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo", ID: fmt.Sprintf("c%d", i)})
		require.NoError(t, err)
		_, err = c.client.Cancel(ctx, "acme", job.ID)
		require.NoError(t, err)
	}
	_, err := c.client.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo", ID: "waits"})
	require.NoError(t, err)

	code, _, errOut := run(t, "jobs", "prune", "--nats-url", c.url)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--older-than is required")

	code, out, errOut := run(t, "jobs", "prune", "--older-than", "1ns", "--state", "cancelled", "--batch", "2", "--nats-url", c.url)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "cancelled: pruned 5 jobs that ended more than 1ns ago")
	for i := range 5 {
		_, err := c.client.Get(ctx, "acme", fmt.Sprintf("c%d", i))
		require.ErrorContains(t, err, "not found")
	}
	job, err := c.client.Get(ctx, "acme", "waits")
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State)

	// Days, as an operator counts them (issue 22: "7d" was refused).
	code, out, errOut = run(t, "jobs", "prune", "--older-than", "7d", "--nats-url", c.url)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "success: pruned 0 jobs that ended more than 7d ago")
	code, out, errOut = run(t, "jobs", "prune", "--older-than", "1d12h", "--state", "failed", "--nats-url", c.url)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "failed: pruned 0 jobs that ended more than 1d12h ago")
	code, _, errOut = run(t, "jobs", "prune", "--older-than", "7x", "--nats-url", c.url)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, `"7x" is not a duration (examples: 7d, 1d12h, 36h, 30m)`)

	code, _, errOut = run(t, "jobs", "prune", "--older-than", "1h", "--state", "waiting", "--nats-url", c.url)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `--state "waiting": not a final state`)

	// 0s: every finished job of the states given, even one that ended
	// just now; a state that is not final is refused before any state is
	// pruned (success, before bogus, was pruned first).
	done, err := c.client.SubmitWait(ctx, fairway.Submission{Group: "acme", Task: "echo", ID: "just-ended"})
	require.NoError(t, err)
	_, err = c.client.Cancel(ctx, "acme", done.ID)
	require.NoError(t, err)
	code, _, errOut = run(t, "jobs", "prune", "--older-than", "0s", "--state", "cancelled,bogus", "--nats-url", c.url)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `--state "bogus": not a final state`)
	_, err = c.client.Get(ctx, "acme", "just-ended")
	require.NoError(t, err, "nothing was pruned")
	code, out, errOut = run(t, "jobs", "prune", "--older-than", "0s", "--state", "cancelled", "--nats-url", c.url)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "cancelled: pruned 1 jobs that ended more than 0s ago")
	_, err = c.client.Get(ctx, "acme", "just-ended")
	require.ErrorContains(t, err, "not found")
}
