package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/cli"
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

// TestSubmitArgsFromAFileOrStdin: --args @FILE reads the arguments from a
// file (half a MiB, more than a shell takes on a command line) and
// --args - from stdin; arguments that are not a JSON object are a usage
// error found before any connection (exit 2, against a NATS URL where
// nothing listens), naming where the JSON breaks.
func TestSubmitArgsFromAFileOrStdin(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx, cancel := context.WithCancel(t.Context())
	done, stderr := c.startExecutor(t, ctx, make(chan struct{}), "ex-args")
	stderr.Wait(t, "executor started", waitTimeout)

	big := `{"text":"` + strings.Repeat("x", 512<<10) + `"}`
	file := filepath.Join(t.TempDir(), "args.json")
	require.NoError(t, os.WriteFile(file, []byte(big+"\n"), 0o600))
	code, out, errOut := run(t, "submit", "echo", "--group", "acme", "--args", "@"+file, "--wait", "--nats-url", c.url)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	require.JSONEq(t, big, lines[1], "echo returns its arguments, read from the file")

	var stdout, stdErr bytes.Buffer
	code = cli.MainWithInput(t.Context(), nil, []string{"submit", "echo", "--group", "acme", "--args", "-", "--wait", "--nats-url", c.url},
		strings.NewReader(`{"from":"stdin"}`), &stdout, &stdErr)
	require.Equal(t, 0, code, stdErr.String())
	require.Contains(t, stdout.String(), `{"from":"stdin"}`)

	nowhere := "nats://127.0.0.1:1"
	for args, says := range map[string]string{
		`{"n": 1,}`:     "--args: not valid JSON at byte 9",
		`"just a text"`: "--args: a JSON object such as",
		"@" + filepath.Join(t.TempDir(), "missing.json"): "no such file",
	} {
		code, _, errOut := run(t, "submit", "echo", "--group", "acme", "--args", args, "--nats-url", nowhere)
		require.Equal(t, 2, code, "%s: %s", args, errOut)
		require.Contains(t, errOut, says, args)
	}

	cancel()
	require.Equal(t, 0, exitCode(t, done, stderr), stderr.String())
}
