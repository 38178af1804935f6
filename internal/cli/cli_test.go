package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/cli"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// signalWriter is an io.Writer that closes seen when its output first
// contains want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = cli.Main(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestDevEndToEnd runs `fairway dev` and drives it from the client commands,
// as a user would from a second terminal.
func TestDevEndToEnd(t *testing.T) {
	// PostgreSQL runs as the unprivileged postgres user when the tests run
	// as root, so the directory must be reachable for it.
	dir, err := os.MkdirTemp("", "fairway-dev-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	natsPort, pgPort, httpPort := freePort(t), freePort(t), freePort(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	stderr := &signalWriter{want: "Fairway is running", seen: make(chan struct{})}
	devDone := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		devDone <- cli.Main(ctx, []string{"dev", "--dev-dir", dir, "--nats-addr", fmt.Sprintf("127.0.0.1:%d", natsPort),
			"--pg-port", fmt.Sprint(pgPort), "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort), "--log-format", "json",
			"--retry-delay", "10ms"}, &bytes.Buffer{}, stderr)
	}()
	select {
	case <-stderr.seen:
	case code := <-devDone:
		t.Fatalf("fairway dev exited with %d:\n%s", code, stderr)
	case <-time.After(time.Minute):
		t.Fatalf("fairway dev did not start within a minute:\n%s", stderr)
	}

	code, out, errOut := run(t, "submit", "fail", "--group", "acme", "--args", `{"times":1}`, "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	id := strings.TrimSpace(out)

	// Wait for the job's final event, replaying the stream from its start.
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	defer nc.Close()
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	final := make(chan events.Event, 1)
	sub, err := client.Subscribe(t.Context(), events.Filter{Group: "acme", Since: time.Unix(0, 0)}, func(ev events.Event) {
		if ev.JobID == id && ev.State.Final() {
			final <- ev
		}
	})
	require.NoError(t, err)
	defer sub.Stop()
	select {
	case ev := <-final:
		require.Equal(t, fairway.StateSuccess, ev.State)
		require.Equal(t, 2, ev.Attempt, "the demo task failed once, then succeeded")
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not finish within 30s")
	}

	code, out, errOut = run(t, "jobs", "show", id, "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	var job fairway.Job
	require.NoError(t, json.Unmarshal([]byte(out), &job))
	require.Equal(t, fairway.StateSuccess, job.State)
	require.Equal(t, 1, job.Retries)

	code, out, _ = run(t, "jobs", "logs", id, "--nats-url", natsURL)
	require.Equal(t, 0, code)
	require.Contains(t, out, "failing on purpose")

	code, out, _ = run(t, "jobs", "list", "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code)
	require.Contains(t, out, id)

	// A bad submission gets an error naming the field, and a non-zero exit.
	code, _, errOut = run(t, "submit", "echo", "--group", "acme", "--priority", "urgent", "--nats-url", natsURL)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `priority: unknown priority "urgent"`)
	code, _, errOut = run(t, "submit", "nosuchtask", "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `unknown task "nosuchtask"`)

	code, out, _ = run(t, "executors", "list", "--nats-url", natsURL)
	require.Equal(t, 0, code)
	require.Contains(t, out, "echo,fail,panic,sleep")

	// Docspell's shutdown endpoint drains the executor, and dev stops
	// everything cleanly.
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/api/v1/shutdownAndExit", httpPort), "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	select {
	case code := <-devDone:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(time.Minute):
		t.Fatal("fairway dev did not stop after shutdownAndExit")
	}
	require.Contains(t, stderr.String(), "PostgreSQL stopped")
}

func TestUsageAndConfigErrors(t *testing.T) {
	code, _, errOut := run(t, "submit", "echo", "--no-such-flag")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "unknown flag: --no-such-flag")

	t.Setenv("FAIRWAY_SCHEDULER_POOL_SIZE", "0")
	code, _, errOut = run(t, "executor")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "scheduler.pool-size")
	require.Contains(t, errOut, "must be at least 1")
}

func TestConfigPrintMasksSecrets(t *testing.T) {
	t.Setenv("FAIRWAY_DATABASE_URL", "postgres://fair:s3cret@db:5432/fairway")
	code, out, errOut := run(t, "config", "print")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "s3cret")
	require.Contains(t, out, "postgres://fair:****@db:5432/fairway")
	require.Contains(t, out, "scheduler.counting-scheme")
}
