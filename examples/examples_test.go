// Package examples_test builds and runs the programs under examples/
// against a real `fairway dev`, as a reader of the README would.
package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

	natsURL := devtest.StartDev(t, filepath.Join(bin, "fairway"),
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", devtest.FreePort(t)),
		"--web-addr", fmt.Sprintf("127.0.0.1:%d", devtest.FreePort(t))).NATSURL
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

	t.Run("node", func(t *testing.T) { testNode(t, client, natsURL) })
	t.Run("python", func(t *testing.T) { testPython(t, client, natsURL) })
}

// testNode runs the Node.js examples: executor.js registers the task
// node-hello and runs its jobs; submit.js submits them (through JetStream
// and the request/reply API) and follows their events; the Go client checks
// what the Node executor reported, cancels a long job on it, and sees it
// deregister after SIGTERM.
func testNode(t *testing.T, client *events.Client, natsURL string) {
	// As python3 for the Python example, node and npm are required: a
	// machine without them fails here rather than skip the example.
	node, npm := lookPath(t, "node"), lookPath(t, "npm")
	dir := "node"
	// The examples use @fairway/client from the repository (a file:
	// dependency, linked): npm installs neither its dependencies nor,
	// everywhere, its build, so install and build clients/typescript first.
	for _, step := range []struct{ dir, what string }{
		{filepath.Join("..", "clients", "typescript"), "ci"},
		{filepath.Join("..", "clients", "typescript"), "run build"},
		{dir, "ci"},
	} {
		install := exec.CommandContext(t.Context(), npm, append(strings.Fields(step.what), "--no-audit", "--no-fund")...)
		install.Dir = step.dir
		out, err := install.CombinedOutput()
		require.NoError(t, err, "npm %s in %s: %s", step.what, step.dir, out)
	}

	const appID, group = "node-tests", "examples"
	executor := exec.Command(node, "executor.js", "--nats-url", natsURL, "--app-id", appID)
	executor.Dir = dir
	ex := devtest.Start(t, executor, syscall.SIGTERM)
	execOut := ex.Out
	ex.WaitFor(t, "registered app-id "+appID)

	// Jobs of node-hello, every other one through the API, run by the
	// Node executor: the result its handler computed, its log line and its
	// progress are stored.
	out2 := runExample(t, node, filepath.Join(dir, "submit.js"), "--nats-url", natsURL, "--group", group,
		"--task", "node-hello", "--count", "4", "--via", "both", "--args", `{"name":"fairway"}`)
	ids := regexp.MustCompile(`submitted job (\S+)`).FindAllStringSubmatch(out2, -1)
	require.Len(t, ids, 4, "submit.js output:\n%s", out2)
	for _, m := range ids {
		id := m[1]
		require.Contains(t, out2, fmt.Sprintf("job %s final state: success", id))
		job, err := client.Get(t.Context(), group, id)
		require.NoError(t, err)
		require.Equal(t, fairway.StateSuccess, job.State, "job %s", id)
		require.Equal(t, appID, job.Executor, "job %s ran on the Node executor", id)
		require.JSONEq(t, `{"greeting":"hello, fairway","chars":7,"from":"node"}`, string(job.Result), "job %s", id)
		require.Equal(t, 100, job.Progress, "job %s", id)
		logs, err := client.Logs(t.Context(), group, id)
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(logs, func(l fairway.LogLine) bool {
			return l.Level == "info" && l.Message == "hello from node, fairway (attempt 1)"
		}), "job %s: the handler's log line; got %+v", id, logs)
	}

	// A long job (600 steps of 100 ms): its progress arrives while it runs,
	// then a cancel from Go reaches the Node handler, which ends it.
	long := fairway.Submission{Group: group, Task: "node-hello", ID: "node-long-" + fairway.NewID(),
		Args: json.RawMessage(`{"name":"long","steps":600,"step_ms":100}`)}
	progressed := make(chan fairway.Progress, 1)
	psub, err := client.SubscribeProgress(group, "node-hello", func(p fairway.Progress) {
		if p.JobID == long.ID && p.Progress > 0 {
			select {
			case progressed <- p:
			default:
			}
		}
	})
	require.NoError(t, err)
	defer psub.Stop()
	since := time.Now().Add(-time.Second)
	_, err = client.Submit(t.Context(), long)
	require.NoError(t, err)
	select {
	case p := <-progressed:
		require.Equal(t, 1, p.Attempt)
	case <-time.After(waitTimeout):
		t.Fatalf("no progress of job %s within %s:\n%s", long.ID, waitTimeout, execOut)
	}
	job, err := client.Get(t.Context(), group, long.ID)
	require.NoError(t, err)
	require.Equal(t, fairway.StateRunning, job.State)
	require.Positive(t, job.Progress, "the progress the Node executor reported is stored")
	_, err = client.Cancel(t.Context(), group, long.ID)
	require.NoError(t, err)
	ev := awaitFinal(t, client, group, long.ID, since)
	require.Equal(t, fairway.StateCancelled, ev.State, "event: %+v", ev)
	job, err = client.Get(t.Context(), group, long.ID)
	require.NoError(t, err)
	require.Equal(t, "cancelled while running", job.Error)

	// SIGTERM: it finishes, deregisters and exits 0.
	require.NoError(t, executor.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, ex.Wait(t), "executor.js must exit 0 after SIGTERM:\n%s", execOut)
	require.Contains(t, execOut.String(), "deregistered instance")
	executors, err := client.Executors(t.Context())
	require.NoError(t, err)
	i := slices.IndexFunc(executors, func(e fairway.Executor) bool { return e.AppID == appID })
	require.GreaterOrEqual(t, i, 0, "executor %s in %+v", appID, executors)
	require.Equal(t, fairway.ExecutorDeregistered, executors[i].State)
}

// testPython runs the Python examples on the package in clients/python:
// worker.py registers py-hello and runs its jobs, submit.py submits them
// in one message and waits for each; the Go client checks what the worker
// reported, and sees it deregister after SIGTERM.
func testPython(t *testing.T, client *events.Client, natsURL string) {
	python := "/usr/bin/python3" // Debian's, as the clients' tests
	if _, err := exec.LookPath(python); err != nil {
		python = lookPath(t, "python3")
	}
	src, err := filepath.Abs(filepath.Join("..", "clients", "python", "src"))
	require.NoError(t, err)
	env := append(os.Environ(), "PYTHONPATH="+src)

	const appID, group = "py-tests", "examples"
	worker := exec.Command(python, filepath.Join("python", "worker.py"), "--nats-url", natsURL, "--app-id", appID)
	worker.Env = env
	w := devtest.Start(t, worker, syscall.SIGTERM)
	out := w.Out
	w.WaitFor(t, "worker "+appID+" registered")

	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	submit := exec.CommandContext(ctx, python, filepath.Join("python", "submit.py"), "--nats-url", natsURL, "--group", group,
		"--task", "py-hello", "--count", "3", "--args", `{"name":"fairway"}`)
	submit.Env = env
	submitted, err := submit.CombinedOutput()
	require.NoError(t, err, "submit.py: %s", submitted)
	ids := regexp.MustCompile(`submitted job (\S+)`).FindAllStringSubmatch(string(submitted), -1)
	require.Len(t, ids, 3, "submit.py output:\n%s", submitted)
	for _, m := range ids {
		id := m[1]
		require.Contains(t, string(submitted), fmt.Sprintf("job %s final state: success", id))
		job, err := client.Get(t.Context(), group, id)
		require.NoError(t, err)
		require.Equal(t, appID, job.Executor, "job %s ran on the Python worker", id)
		require.JSONEq(t, `{"greeting":"hello, fairway","chars":7,"from":"python"}`, string(job.Result), "job %s", id)
		require.Equal(t, 100, job.Progress, "job %s", id)
		logs, err := client.Logs(t.Context(), group, id)
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(logs, func(l fairway.LogLine) bool {
			return l.Level == "info" && l.Message == "hello from python, fairway (attempt 1)"
		}), "job %s: the handler's log line; got %+v", id, logs)
	}

	// SIGTERM: it finishes, deregisters and exits 0.
	require.NoError(t, worker.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, w.Wait(t), "worker.py must exit 0 after SIGTERM:\n%s", out)
	require.Contains(t, out.String(), "worker "+appID+" deregistered")
}

// lookPath finds a program the examples need, or fails saying how to
// install it.
func lookPath(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("the Node.js examples need %s on PATH: install Debian's nodejs and npm (apt-get install nodejs npm)", name)
	}
	return path
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
	return devtest.FinalEvent(t, client, group, id, since, waitTimeout)
}

func match(t *testing.T, s, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	require.NotNil(t, m, "no %q in:\n%s", pattern, s)
	return m[1]
}
