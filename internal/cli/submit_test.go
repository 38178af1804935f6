package cli_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

// TestSubmitUnknownTask: fairway submit waits for the coordinators' answer
// and prints the rejection of a task that no executor has registered, with
// the tasks that are known, and exits 1; with --async the job is published
// and only a rejected event says so. Before any executor registered, a task
// is accepted with a warning: the job waits for one.
func TestSubmitUnknownTask(t *testing.T) {
	t.Parallel()
	c := startCluster(t)

	code, out, errOut := run(t, "submit", "later", "--group", "acme", "--nats-url", c.url)
	require.Equal(t, 0, code, errOut)
	require.NotEmpty(t, strings.TrimSpace(out))
	require.Contains(t, errOut, `fairway: warning: no live executor runs task "later": the job waits until one registers`)

	ctx, cancel := context.WithCancel(t.Context())
	done, stderr := c.startExecutor(t, ctx, make(chan struct{}), "ex-tasks")
	stderr.Wait(t, "executor started", waitTimeout)

	code, out, errOut = run(t, "submit", "nosuchtask", "--group", "acme", "--nats-url", c.url)
	require.Equal(t, 1, code, errOut)
	require.Empty(t, out, "no job id: nothing was stored")
	require.Equal(t, "fairway: rejected: unknown task \"nosuchtask\": no executor has registered it (known tasks: echo, fail, panic, sleep, snooze)\n", errOut)
	code, _, errOut = run(t, "submit", "echo", "--group", "acme", "--priority", "urgent", "--nats-url", c.url)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, `fairway: rejected: priority: unknown priority "urgent"`)

	code, out, errOut = run(t, "submit", "nosuchtask", "--group", "acme", "--async", "--nats-url", c.url)
	require.Equal(t, 0, code, errOut)
	ev := c.await(t, strings.TrimSpace(out), fairway.StateRejected)
	require.Contains(t, ev.Error, `unknown task "nosuchtask": no executor has registered it`)

	code, out, _ = run(t, "submit", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, out, `rejected: unknown task "x": no executor has registered it`)
	require.Contains(t, out, `only a "rejected" event`)

	cancel()
	require.Equal(t, 0, exitCode(t, done, stderr), stderr.String())
}
