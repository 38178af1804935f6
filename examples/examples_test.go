// Package examples_test builds and runs the programs under examples/
// against a real `fairway dev`, as a reader of the README would.
package examples_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/devtest"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// waitTimeout bounds every wait: generous, since the machine is shared.
const waitTimeout = 2 * time.Minute

// TestExamples starts `fairway dev` once and runs every example against it.
func TestExamples(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator),
		"github.com/fairwayhq/fairway/cmd/fairway",
		"github.com/fairwayhq/fairway/examples/submit-and-follow",
		"github.com/fairwayhq/fairway/examples/embedded-executor")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	natsURL := startDev(t, filepath.Join(bin, "fairway"))
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)

	t.Run("submit-and-follow", func(t *testing.T) {
		out := runExample(t, filepath.Join(bin, "submit-and-follow"), "-nats-url", natsURL, "-group", "examples")
		require.Contains(t, out, "final state: success")
		id := match(t, out, `submitted job (\S+)`)
		requireState(t, client, "examples", id, fairway.StateSuccess)
	})

	t.Run("embedded-executor", func(t *testing.T) {
		out := runExample(t, filepath.Join(bin, "embedded-executor"), "-nats-url", natsURL, "-group", "examples", "-name", "tests")
		require.Contains(t, out, `result: {"greeting":"hello, tests"}`)
		require.Contains(t, out, "final state: success")
		id := match(t, out, `submitted job (\S+)`)
		requireState(t, client, "examples", id, fairway.StateSuccess)
	})

	t.Run("python-submit", func(t *testing.T) {
		python, err := exec.LookPath("python3")
		require.NoError(t, err, "the Python example needs python3 on PATH")
		since := time.Now().Add(-time.Second)
		out := runExample(t, python, filepath.Join("python-submit", "submit.py"), "--nats-url", natsURL,
			"--group", "examples", "--task", "echo", "--args", `{"from":"python"}`)
		require.Regexp(t, `ack \{"stream":"FAIRWAY_SUBMIT",.*"seq":\d+`, out)
		id := match(t, out, `job (\S+) \(group examples, task echo\)`)
		ev := awaitFinal(t, client, "examples", id, since)
		require.Equal(t, fairway.StateSuccess, ev.State, "event: %+v", ev)
		job, err := client.Get(t.Context(), "examples", id)
		require.NoError(t, err)
		require.JSONEq(t, `{"from":"python"}`, string(job.Result), "echo returns its args")
	})
}

// startDev runs `fairway dev` on free ports in a fresh directory, waits
// until it says it is running, and stops it (SIGINT) when the test ends.
// It returns the URL of its NATS server.
func startDev(t *testing.T, fairwayBin string) string {
	t.Helper()
	// As root, fairway dev runs PostgreSQL as the unprivileged postgres
	// user, which must reach the directory: t.TempDir's parent is 0700.
	dir := devtest.Dir(t, "fairway-examples-")
	natsPort, pgPort, httpPort, webPort := devtest.FreePort(t), devtest.FreePort(t), devtest.FreePort(t), devtest.FreePort(t)

	stderr := &devtest.Output{}
	cmd := exec.Command(fairwayBin, "dev", "--dev-dir", dir,
		"--nats-addr", fmt.Sprintf("127.0.0.1:%d", natsPort),
		"--pg-port", fmt.Sprint(pgPort),
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--web-addr", fmt.Sprintf("127.0.0.1:%d", webPort),
		"--log-format", "json")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT) // fairway dev stops its PostgreSQL too
		select {
		case <-exited:
		case <-time.After(waitTimeout):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case <-stderr.Seen("Fairway is running"):
	case err := <-exited:
		t.Fatalf("fairway dev exited (%v):\n%s", err, stderr)
	case <-time.After(waitTimeout):
		t.Fatalf("fairway dev did not start within %s:\n%s", waitTimeout, stderr)
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
}

// runExample runs a program with a deadline, requires exit code 0 and
// returns its standard output.
func runExample(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("%s %s\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), stdout.String(), stderr.String())
	require.NoError(t, err, "the example must exit 0")
	return stdout.String()
}

// requireState checks the job's state through the request/reply API.
func requireState(t *testing.T, client *events.Client, group, id string, want fairway.State) {
	t.Helper()
	job, err := client.Get(t.Context(), group, id)
	require.NoError(t, err)
	require.Equal(t, want, job.State, "job %s", id)
}

// awaitFinal waits for the job's final event, replaying from since.
func awaitFinal(t *testing.T, client *events.Client, group, id string, since time.Time) events.Event {
	t.Helper()
	final := make(chan events.Event, 1)
	sub, err := client.Subscribe(t.Context(), events.Filter{Group: group, Since: since}, func(ev events.Event) {
		if ev.JobID == id && (ev.State.Final() || ev.State == fairway.StateRejected) {
			select {
			case final <- ev:
			default:
			}
		}
	})
	require.NoError(t, err)
	defer sub.Stop()
	select {
	case ev := <-final:
		return ev
	case <-time.After(waitTimeout):
		t.Fatalf("job %s reached no final state within %s", id, waitTimeout)
		return events.Event{}
	}
}

func match(t *testing.T, s, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	require.NotNil(t, m, "no %q in:\n%s", pattern, s)
	return m[1]
}
