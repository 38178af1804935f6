package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/cli"
	"github.com/fairwayhq/fairway/internal/devtest"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/pgtest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// waitTimeout bounds every wait for an event: generous, since a failing
// test ends at the first one that does not come.
const waitTimeout = time.Minute

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = cli.Main(t.Context(), nil, args, &out, &errOut)
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
	t.Cleanup(func() { require.NoError(t, os.RemoveAll(dir)) })
	natsPort, pgPort, httpPort, webPort := devtest.FreePort(t), devtest.FreePort(t), devtest.FreePort(t), devtest.FreePort(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	dev := cli.StartDev(t, "Fairway is running", "--dev-dir", dir, "--nats-addr", fmt.Sprintf("127.0.0.1:%d", natsPort),
		"--pg-port", fmt.Sprint(pgPort), "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort), "--log-format", "json",
		"--retry-delay", "10ms", "--web-addr", fmt.Sprintf("127.0.0.1:%d", webPort))
	stderr := dev.Stderr

	code, out, errOut := run(t, "submit", "fail", "--group", "acme", "--args", `{"times":1}`, "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	id := strings.TrimSpace(out)

	// Wait for the job's final event, replaying the stream from its start.
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	defer nc.Close()
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	ev := finalEvent(t, client, "acme", id)
	require.Equal(t, fairway.StateSuccess, ev.State)
	require.Equal(t, 2, ev.Attempt, "the demo task failed once, then succeeded")

	// The process's /metrics (coordinator and executor, in dev) counted
	// the job: its two runs, its wait, its claims, its events; and a job
	// submitted through the submit stream, its ingest batch.
	_, err = client.SubmitMany(t.Context(), []fairway.Submission{{Group: "acme", Task: "echo"}})
	require.NoError(t, err)
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", httpPort)
	scrapeUntil(t, metricsURL, map[string]float64{
		`fairway_job_run_seconds_count{outcome="error",task="fail"}`:     1,
		`fairway_job_run_seconds_count{outcome="success",task="fail"}`:   1,
		`fairway_job_wait_seconds_count{task="fail"}`:                    2,
		`fairway_events_total{group="acme",state="success",task="fail"}`: 1,
		`fairway_events_total{group="acme",state="stuck",task="fail"}`:   1,
		`fairway_ingest_batch_size_count`:                                1,
		`fairway_claim_jobs_count`:                                       2,
		`fairway_report_batch_size_count`:                                1,
		`fairway_executor_slots{`:                                        1, // any executor label: its pool size
	})

	// Job ids are unique per group only: the job commands need the group.
	code, _, errOut = run(t, "jobs", "show", id, "--nats-url", natsURL)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--group is required")
	code, _, errOut = run(t, "jobs", "show", id, "--group", "globex", "--nats-url", natsURL)
	require.Equal(t, 1, code, "another group's job of that id does not exist")
	require.Contains(t, errOut, "not found")
	code, out, errOut = run(t, "jobs", "show", id, "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	var job fairway.Job
	require.NoError(t, json.Unmarshal([]byte(out), &job))
	require.Equal(t, fairway.StateSuccess, job.State)
	require.Equal(t, 1, job.Retries)

	code, out, _ = run(t, "jobs", "logs", id, "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code)
	require.Contains(t, out, "failing on purpose")

	code, out, _ = run(t, "jobs", "list", "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code)
	require.Contains(t, out, id)

	// submit --wait: the id, then the result, and the job's outcome as the
	// exit code (0 succeeded, 3 failed, 4 cancelled); with --async too.
	code, out, errOut = run(t, "submit", "echo", "--group", "acme", "--args", `{"hello":"wait"}`, "--wait", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	require.JSONEq(t, `{"hello":"wait"}`, lines[1], "the result, after the id")
	code, out, errOut = run(t, "submit", "fail", "--group", "acme", "--args", `{"times":5}`, "--max-retries", "0", "--async", "--wait", "--nats-url", natsURL)
	require.Equal(t, 3, code, "failed: %s", errOut)
	require.Contains(t, errOut, "failed: ")
	failedID := strings.TrimSpace(out)
	require.Contains(t, errOut, failedID)
	// jobs retry runs it again: a new attempt, which fails as well.
	code, out, errOut = run(t, "jobs", "retry", failedID, "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "job "+failedID+" retried: waiting\n", out)
	awaitEvent(t, client, "acme", func(ev events.Event) bool {
		return ev.JobID == failedID && ev.State == fairway.StateFailed && ev.Attempt == 2
	})
	sleeping := make(chan struct{})
	go func() {
		defer close(sleeping)
		code, _, errOut := run(t, "submit", "sleep", "--group", "acme", "--id", "waited-sleep", "--args", `{"seconds":60}`, "--wait", "--nats-url", natsURL)
		if code != 4 {
			t.Errorf("a cancelled job's submit --wait exits %d, not 4: %s", code, errOut)
		}
	}()
	eventOf := func(state fairway.State) func(events.Event) bool {
		return func(ev events.Event) bool { return ev.JobID == "waited-sleep" && ev.State == state }
	}
	awaitEvent(t, client, "acme", eventOf(fairway.StateRunning))
	code, _, errOut = run(t, "jobs", "cancel", "waited-sleep", "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	<-sleeping

	// jobs list says when a delayed job is due, and that a held one waits
	// for its release.
	code, _, errOut = run(t, "submit", "echo", "--group", "acme", "--id", "delayed-1", "--run-at", "2h", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	code, _, errOut = run(t, "submit", "echo", "--group", "acme", "--id", "held-1", "--pending", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	code, out, errOut = run(t, "jobs", "list", "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "DUE")
	require.Regexp(t, `delayed-1 .*\(in (1h59m\d+s|2h0m0s)\)`, out)
	require.Regexp(t, `held-1 .* on release`, out)

	// A bad submission gets an error naming the field, and a non-zero exit.
	code, _, errOut = run(t, "submit", "echo", "--group", "acme", "--priority", "urgent", "--nats-url", natsURL)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `priority: unknown priority "urgent"`)
	code, _, errOut = run(t, "submit", "nosuchtask", "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `unknown task "nosuchtask"`)

	// A held job waits for its release; its priority can change meanwhile.
	code, out, errOut = run(t, "submit", "echo", "--group", "acme", "--pending", "--expires-at", "1h", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	held := strings.TrimSpace(out)
	code, out, errOut = run(t, "jobs", "priority", held, "--set", "high", "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "priority high")
	code, out, errOut = run(t, "jobs", "show", held, "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &job))
	require.Equal(t, fairway.StatePending, job.State)
	require.NotNil(t, job.ExpiresAt)
	// The queue gauges, read from PostgreSQL, see the pending job.
	scrapeUntil(t, metricsURL, map[string]float64{
		`fairway_jobs{group="acme",state="pending",task="echo"}`: 1,
		`fairway_oldest_due_seconds{group="acme",task="echo"}`:   0,
	})
	code, out, errOut = run(t, "jobs", "release", held, "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "released")
	code, _, errOut = run(t, "jobs", "release", id, "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "is success, not pending")
	code, _, errOut = run(t, "submit", "echo", "--group", "acme", "--run-at", "1h", "--trigger-after", "2h", "--nats-url", natsURL)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "trigger_after: give run_at (or run_in) or trigger_after, not both")

	// Periodic tasks: a bad timer is refused naming the part, before any
	// connection (a value that does not parse: exit 2); run-now fires.
	code, _, errOut = run(t, "periodic", "add", "nightly", "echo", "--group", "acme", "--timer", "*-*-* 88:00", "--nats-url", natsURL)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "hour value 88 not in range 0..23")
	code, _, errOut = run(t, "periodic", "add", "nightly", "echo", "--group", "acme", "--timer", "0 3 * *", "--nats-url", natsURL)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "5 fields")
	code, out, errOut = run(t, "periodic", "add", "nightly", "echo", "--group", "acme", "--timer", "*-*-* 03:00", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "periodic task nightly saved; next run")
	fired := make(chan events.Event, 1)
	periodicSub, err := client.Subscribe(t.Context(), events.Filter{Group: "acme", State: fairway.StateFired}, func(ev events.Event) { fired <- ev })
	require.NoError(t, err)
	defer periodicSub.Stop()
	code, out, errOut = run(t, "periodic", "run-now", "nightly", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "periodic task nightly fires now")
	select {
	case ev := <-fired:
		require.Equal(t, "nightly", ev.Periodic)
	case <-time.After(30 * time.Second):
		t.Fatal("run-now did not fire the periodic task")
	}
	// A cron expression: listed as written, with its next three runs in
	// its zone.
	code, _, errOut = run(t, "periodic", "add", "cron-nightly", "echo", "--group", "acme", "--timer", "CRON_TZ=Asia/Tokyo 30 3 * * *", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	code, out, errOut = run(t, "periodic", "list", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "nightly")
	require.Contains(t, out, "*-*-* 03:00")
	require.Contains(t, out, "NEXT RUNS")
	require.Contains(t, out, "CRON_TZ=Asia/Tokyo 30 3 * * *")
	require.Regexp(t, `cron-nightly .*T03:30:00\+09:00, \S+T03:30:00\+09:00, \S+T03:30:00\+09:00`, out)
	code, _, errOut = run(t, "periodic", "delete", "cron-nightly", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	code, _, errOut = run(t, "periodic", "delete", "nightly", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	code, _, errOut = run(t, "periodic", "disable", "nightly", "--nats-url", natsURL)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no periodic task "nightly"`)

	// A workflow from a file: its refs and ids; the graph of its root; a
	// job submitted after, depending on one of them; a cycle refused.
	wf := filepath.Join(t.TempDir(), "wf.json")
	require.NoError(t, os.WriteFile(wf, []byte(`{"jobs":[
		{"ref":"fetch","task":"echo"},
		{"ref":"parse","task":"echo","depends_on":["fetch"]},
		{"ref":"broken","task":"fail","args":{"permanent":true},"depends_on":["fetch"]},
		{"ref":"mail","task":"echo","depends_on":["parse","broken"]}]}`), 0o644))
	code, out, errOut = run(t, "workflow", "submit", wf, "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	refs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		ref, id, ok := strings.Cut(line, "\t")
		require.True(t, ok, out)
		refs[ref] = id
	}
	require.Len(t, refs, 4, out)
	ev = finalEvent(t, client, "acme", refs["mail"])
	require.Equal(t, fairway.StateCancelled, ev.State)
	require.Equal(t, "dependency "+refs["broken"]+" failed", ev.Error)
	code, out, errOut = run(t, "jobs", "graph", refs["fetch"], "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "→ "+refs["fetch"]+"  echo  success")
	require.Contains(t, out, "└── "+refs["broken"]+"  fail  failed")
	require.Contains(t, out, refs["mail"]+"  echo  cancelled: dependency "+refs["broken"]+" failed")
	code, out, errOut = run(t, "jobs", "graph", refs["mail"], "--group", "acme", "--dot", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, fmt.Sprintf("%q -> %q;", refs["parse"], refs["mail"]))
	// A graph beyond 500 jobs is cut short, and the command says so.
	fan := []string{`{"ref":"root","task":"echo"}`}
	for i := range 599 {
		fan = append(fan, fmt.Sprintf(`{"ref":"leaf-%d","task":"echo","depends_on":["root"]}`, i))
	}
	require.NoError(t, os.WriteFile(wf, []byte(`{"jobs":[`+strings.Join(fan, ",")+`]}`), 0o644))
	code, out, errOut = run(t, "workflow", "submit", wf, "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	root, _, _ := strings.Cut(strings.Split(strings.TrimSpace(out), "\n")[0], "\t")
	require.Equal(t, "root", root, out)
	rootID := strings.TrimPrefix(strings.Split(strings.TrimSpace(out), "\n")[0], "root\t")
	code, out, errOut = run(t, "jobs", "graph", rootID, "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "warning: graph truncated")
	require.Contains(t, out, "→ "+rootID)
	code, out, errOut = run(t, "submit", "echo", "--group", "acme", "--depends-on", refs["parse"], "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	code, out, errOut = run(t, "jobs", "show", strings.TrimSpace(out), "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &job))
	require.Equal(t, []string{refs["parse"]}, job.DependsOn)
	require.NotEqual(t, fairway.StatePending, job.State, "parse succeeded already: released at once")
	require.NoError(t, os.WriteFile(wf, []byte(`{"jobs":[{"ref":"a","task":"echo","depends_on":["b"]},{"ref":"b","task":"echo","depends_on":["a"]}]}`), 0o644))
	code, _, errOut = run(t, "workflow", "submit", wf, "--group", "acme", "--nats-url", natsURL)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "jobs[0].depends_on: the workflow's dependencies form a cycle (→: depends on): a → b → a")

	// Snooze: the demo task puts itself off once, without a retry.
	code, out, errOut = run(t, "submit", "snooze", "--group", "acme", "--args", `{"times":1,"seconds":0.2}`, "--max-retries", "0", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	ev = finalEvent(t, client, "acme", strings.TrimSpace(out))
	require.Equal(t, fairway.StateSuccess, ev.State)
	require.Equal(t, 2, ev.Attempt, "snoozed once, then run again")

	// Concurrency limits: set, listed with what is held, removed.
	code, out, errOut = run(t, "limits", "set", "group", "*", "20", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^group\s+\*\s+20\s+\d+$`, out)
	code, _, errOut = run(t, "limits", "set", "queue", "x", "1", "--nats-url", natsURL)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `kind: unknown kind "queue"`)
	code, _, errOut = run(t, "limits", "set", "task", "echo", "many", "--nats-url", natsURL)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `MAX "many" is not a whole number`)
	code, out, errOut = run(t, "limits", "delete", "group", "*", "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "no limits")

	code, out, _ = run(t, "executors", "list", "--nats-url", natsURL)
	require.Equal(t, 0, code)
	require.Contains(t, out, "echo,fail,panic,sleep,snooze")
	require.Regexp(t, `(?m)^\S+\s+\S+\s+live\s`, out, "the state column")

	// The dashboard: the banner's link carries the admin token, which dev
	// wrote to its directory (0600), as it did a read-only one.
	adminToken, err := os.ReadFile(filepath.Join(dir, "web-admin.token"))
	require.NoError(t, err)
	readToken, err := os.ReadFile(filepath.Join(dir, "web-read.token"))
	require.NoError(t, err)
	for _, f := range []string{"web-admin.token", "web-read.token"} {
		info, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), f)
	}
	webURL := fmt.Sprintf("http://127.0.0.1:%d/", webPort)
	require.Contains(t, stderr.String(), webURL+"#token="+strings.TrimSpace(string(adminToken)))
	for token, role := range map[string]string{string(adminToken): "admin", string(readToken): "read"} {
		req, err := http.NewRequest("GET", webURL+"api/session", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(token))
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var sess struct{ Role string }
		require.NoError(t, json.NewDecoder(res.Body).Decode(&sess))
		res.Body.Close()
		require.Equal(t, role, sess.Role)
	}

	// Docspell's shutdown endpoint drains the executor, and dev stops
	// everything cleanly.
	// Its token was generated into the dev dir.
	resp := postShutdown(t, fmt.Sprintf("127.0.0.1:%d", httpPort), devToken(t, dir), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	dev.Exited(t, "shutdownAndExit")
	require.Contains(t, stderr.String(), "PostgreSQL stopped")
}

// finalEvent waits for the final event of job id of group, replaying the
// stream from its start.
// awaitEvent waits for an event of group that match accepts, replaying
// the stream from its start.
func awaitEvent(t *testing.T, client *events.Client, group string, match func(events.Event) bool) {
	t.Helper()
	found := make(chan struct{})
	var once sync.Once
	sub, err := client.Subscribe(t.Context(), events.Filter{Group: group, Since: time.Unix(0, 0)}, func(ev events.Event) {
		if match(ev) {
			once.Do(func() { close(found) })
		}
	})
	require.NoError(t, err)
	defer sub.Stop()
	select {
	case <-found:
	case <-time.After(waitTimeout):
		t.Fatalf("no matching event of group %s within %s", group, waitTimeout)
	}
}

func finalEvent(t *testing.T, client *events.Client, group, id string) events.Event {
	t.Helper()
	return devtest.FinalEvent(t, client, group, id, time.Unix(0, 0), 30*time.Second)
}

func TestUsageAndConfigErrors(t *testing.T) {
	code, _, errOut := run(t, "submit", "echo", "--no-such-flag")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "unknown flag: --no-such-flag")

	// Every mistake in the command line exits 2, as the README says, and
	// names the help to read.
	for _, args := range [][]string{{"nope"}, {"jobs", "get"}, {"jobs", "show"}, {"periodic", "add", "only-one"}, {"creds", "add"}} {
		code, _, errOut := run(t, args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "--help", "%v", args)
	}
	// A command with subcommands, alone, shows its help; it lists them all.
	code, out, _ := run(t, "jobs")
	require.Equal(t, 0, code)
	for _, sub := range []string{"list", "show", "cancel", "logs", "release", "priority", "retry", "prune"} {
		require.Contains(t, out, "\n  "+sub+" ", "jobs --help lists %s", sub)
	}

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

// cluster is a coordinator on a fresh database and an embedded NATS server,
// for the commands that need a running Fairway.
type cluster struct {
	url    string
	client *events.Client

	mu      sync.Mutex
	events  []events.Event // every event received, in order
	arrived chan struct{}  // closed (and replaced) when one arrives
	awaited map[string]int // per job: events before this index were awaited past
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	ns, nc := natstest.Start(t)
	coord, err := coordinator.New(storetest.Public(storetest.Open(t)), nc, coordinator.Config{})
	require.NoError(t, err)
	require.NoError(t, coord.Start(t.Context()))
	t.Cleanup(coord.Stop)
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	c := &cluster{url: ns.ClientURL(), client: client, arrived: make(chan struct{}), awaited: map[string]int{}}
	sub, err := client.Subscribe(t.Context(), events.Filter{}, func(ev events.Event) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.events = append(c.events, ev)
		close(c.arrived)
		c.arrived = make(chan struct{})
	})
	require.NoError(t, err)
	t.Cleanup(sub.Stop)
	return c
}

// await waits for the event of job id that enters state, after the event
// an earlier await of the job returned. It finds the events of every job,
// however long ago they arrived: jobs need not end in the order a test
// awaits them.
func (c *cluster) await(t *testing.T, id string, state fairway.State) events.Event {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		c.mu.Lock()
		var seen []string
		for i := c.awaited[id]; i < len(c.events); i++ {
			ev := c.events[i]
			if ev.JobID != id {
				continue
			}
			if ev.State == state {
				c.awaited[id] = i + 1
				c.mu.Unlock()
				return ev
			}
			seen = append(seen, fmt.Sprintf("%s@%s(%s %s)", ev.State, ev.Time.Format(time.TimeOnly), ev.Executor, ev.Error))
		}
		arrived := c.arrived
		c.mu.Unlock()
		select {
		case <-arrived:
		case <-timeout:
			t.Fatalf("job %s did not become %s within %s; its events: %v", id, state, waitTimeout, seen)
		}
	}
}

// executorArgs runs `fairway executor` on c with a drain timeout that no
// test waits for, and one slot: while its job runs it asks for no other, so
// a released job is not handed back to it by a request still in flight.
func (c *cluster) executorArgs(appID string) []string {
	return []string{"executor", "--nats-url", c.url, "--app-id", appID, "--pool-size", "1", "--http-addr", "", "--drain-timeout", "1h", "--log-format", "json"}
}

// startExecutor runs `fairway executor` in the test's process, stopped by
// ctx and force; the exit code arrives on the returned channel.
func (c *cluster) startExecutor(t *testing.T, ctx context.Context, force <-chan struct{}, appID string) (<-chan int, *devtest.Output) {
	t.Helper()
	stderr := &devtest.Output{}
	done := make(chan int, 1)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		done <- cli.Main(ctx, force, c.executorArgs(appID), &bytes.Buffer{}, stderr)
	}()
	t.Cleanup(func() {
		select {
		case <-returned:
		case <-time.After(waitTimeout):
			t.Errorf("fairway executor did not exit:\n%s", stderr)
		}
	})
	return done, stderr
}

func exitCode(t *testing.T, done <-chan int, stderr *devtest.Output) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(waitTimeout):
		t.Fatalf("fairway executor did not exit within %s:\n%s", waitTimeout, stderr)
		return 0
	}
}

// TestExecutorFirstSignalLetsRunningJobsFinish cancels the command's
// context, as a first SIGTERM does: the running job finishes, then the
// executor exits cleanly.
func TestExecutorFirstSignalLetsRunningJobsFinish(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, stderr := c.startExecutor(t, ctx, make(chan struct{}), "ex-graceful")
	id, err := c.client.Submit(t.Context(), fairway.Submission{Group: "g", Task: "sleep", Args: json.RawMessage(`{"seconds":1}`)})
	require.NoError(t, err)
	c.await(t, id, fairway.StateRunning)

	cancel()
	stderr.Wait(t, "executor draining", waitTimeout)
	c.await(t, id, fairway.StateSuccess)
	require.Equal(t, 0, exitCode(t, done, stderr), stderr.String())
	require.NotContains(t, stderr.String(), "second signal")
}

// TestExecutorSecondSignalReleasesRunningJobs cancels the context, then
// closes force, as a second SIGTERM does: the running job, which would run
// for an hour, is cancelled and returns to waiting without a failed attempt.
func TestExecutorSecondSignalReleasesRunningJobs(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	force := make(chan struct{})
	done, stderr := c.startExecutor(t, ctx, force, "ex-forced")
	id, err := c.client.Submit(t.Context(), fairway.Submission{Group: "g", Task: "sleep", Args: json.RawMessage(`{"seconds":3600}`)})
	require.NoError(t, err)
	c.await(t, id, fairway.StateRunning)

	cancel()
	stderr.Wait(t, "executor draining", waitTimeout)
	close(force)
	ev := c.await(t, id, fairway.StateWaiting)
	require.Equal(t, fairway.StateRunning, ev.PreviousState)
	require.Equal(t, 0, exitCode(t, done, stderr), "released jobs lose nothing: a clean stop\n%s", stderr)
	out := stderr.String()
	require.Contains(t, out, "second signal: cancelling 1 running jobs; they return to waiting")
	require.Contains(t, out, `executor \"ex-forced\": running jobs released (1): cancelled by a second signal`)
	job, err := c.client.Get(t.Context(), "g", id)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State)
	require.Equal(t, 0, job.Retries, "a released job has not failed an attempt")
}

// TestSignalsToBuiltBinary delivers real SIGTERM and SIGINT to a built
// fairway executor: the first drains it, the second releases its running
// job, and it exits.
func TestSignalsToBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the fairway binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "fairway")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/fairwayhq/fairway/cmd/fairway")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	c := startCluster(t)
	stderr := &devtest.Output{}
	cmd := exec.Command(bin, c.executorArgs("ex-binary")...)
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-waited
	})
	id, err := c.client.Submit(t.Context(), fairway.Submission{Group: "g", Task: "sleep", Args: json.RawMessage(`{"seconds":3600}`)})
	require.NoError(t, err)
	c.await(t, id, fairway.StateRunning)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	stderr.Wait(t, "executor draining", waitTimeout)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	c.await(t, id, fairway.StateWaiting)
	select {
	case err := <-exited:
		require.NoError(t, err, "released jobs lose nothing: exit 0\n%s", stderr)
	case <-time.After(waitTimeout):
		t.Fatalf("fairway executor did not exit after two signals:\n%s", stderr)
	}
	require.Contains(t, stderr.String(), "second signal: cancelling 1 running jobs")
}

// TestCoordinatorStreamReplicasFromConfig checks that nats.replicas reaches
// the streams: a single NATS server refuses 3 replicas, with a hint.
func TestCoordinatorStreamReplicasFromConfig(t *testing.T) {
	t.Parallel()
	ns, _ := natstest.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := &devtest.Output{}
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, nil, []string{"coordinator", "--nats-url", ns.ClientURL(), "--database-url", pgtest.NewDB(t),
			"--replicas", "3", "--log-format", "json"}, &bytes.Buffer{}, stderr)
	}()
	select {
	case code := <-done:
		require.Equal(t, 1, code, stderr.String())
	case <-stderr.Seen("coordinator started"):
		cancel()
		<-done
		t.Fatalf("the coordinator started with 3 replicas on a single NATS server:\n%s", stderr)
	case <-time.After(waitTimeout):
		t.Fatalf("fairway coordinator neither started nor failed within %s:\n%s", waitTimeout, stderr)
	}
	require.Contains(t, stderr.String(), "with 3 replicas")
	require.Contains(t, stderr.String(), "a single NATS server keeps 1 replica: use 1, or a JetStream cluster of at least 3 servers")
}

// TestCoordinatorServesMetrics: with --metrics-addr, `fairway coordinator`
// answers /healthz and /metrics, with its own metrics and the process's.
func TestCoordinatorServesMetrics(t *testing.T) {
	t.Parallel()
	ns, _ := natstest.Start(t)
	addr := fmt.Sprintf("127.0.0.1:%d", devtest.FreePort(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := &devtest.Output{}
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, nil, []string{"coordinator", "--nats-url", ns.ClientURL(), "--database-url", pgtest.NewDB(t),
			"--metrics-addr", addr, "--log-format", "json"}, &bytes.Buffer{}, stderr)
	}()
	select {
	case <-stderr.Seen("coordinator HTTP endpoint"):
	case code := <-done:
		t.Fatalf("fairway coordinator exited with %d:\n%s", code, stderr)
	case <-time.After(waitTimeout):
		t.Fatalf("fairway coordinator did not start within %s:\n%s", waitTimeout, stderr)
	}
	health, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	health.Body.Close()
	require.Equal(t, http.StatusOK, health.StatusCode)
	scrapeUntil(t, "http://"+addr+"/metrics", map[string]float64{
		"fairway_claim_seconds_count":     0,
		"fairway_ingest_batch_size_count": 0,
		"fairway_outbox_lag_seconds":      0,
		"go_goroutines":                   1,
		"process_resident_memory_bytes":   1,
	})
	cancel()
	require.Equal(t, 0, <-done, stderr.String())
}

// TestShutdownAndExitBeforeACoordinatorAnswers: an executor still waiting
// for a coordinator to register with stops on shutdownAndExit and exits 0.
func TestShutdownAndExitBeforeACoordinatorAnswers(t *testing.T) {
	t.Parallel()
	ns, _ := natstest.Start(t) // no coordinator
	addr := fmt.Sprintf("127.0.0.1:%d", devtest.FreePort(t))
	stderr := &devtest.Output{}
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(t.Context(), nil, []string{"executor", "--nats-url", ns.ClientURL(), "--app-id", "early",
			"--http-addr", addr, "--http-token", testToken, "--log-format", "json"}, &bytes.Buffer{}, stderr)
	}()
	stderr.Wait(t, "executor HTTP endpoint", waitTimeout)
	health, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	require.NoError(t, health.Body.Close())
	require.Equal(t, http.StatusServiceUnavailable, health.StatusCode, "not healthy before it registered")
	resp := postShutdown(t, addr, testToken, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 0, exitCode(t, done, stderr), stderr.String())
	require.Contains(t, stderr.String(), "shutdown asked for before the executor registered")
	require.NotContains(t, stderr.String(), "executor started")
}

// TestHealthzOnceRegistered: the executor's health check answers 200 once
// the executor has registered.
func TestHealthzOnceRegistered(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	addr := fmt.Sprintf("127.0.0.1:%d", devtest.FreePort(t))
	ctx, cancel := context.WithCancel(t.Context())
	stderr := &devtest.Output{}
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, nil, []string{"executor", "--nats-url", c.url, "--app-id", "healthy", "--http-addr", addr,
			"--http-token-file", filepath.Join(t.TempDir(), "token"), "--log-format", "json"},
			&bytes.Buffer{}, stderr)
	}()
	stderr.Wait(t, "executor started", waitTimeout)
	resp, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cancel()
	require.Equal(t, 0, exitCode(t, done, stderr), stderr.String())
}

// scrapeUntil reads the Prometheus text at url until every metric of want
// has at least its value (a name ending in "{" matches any labels), or
// fails after waitTimeout showing what it read. Metrics change without an
// event to await, so this polls.
func scrapeUntil(t *testing.T, url string, want map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		resp, err := http.Get(url) //nolint:gosec // G107: the test's own server
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		got := map[string]float64{}
		for _, line := range strings.Split(string(body), "\n") {
			i := strings.LastIndexByte(line, ' ')
			if strings.HasPrefix(line, "#") || i < 0 {
				continue
			}
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				continue
			}
			got[line[:i]] = v
		}
		missing := ""
		for name, min := range want {
			ok := false
			for key, v := range got {
				if (key == name || strings.HasSuffix(name, "{") && strings.HasPrefix(key, name)) && v >= min {
					ok = true
				}
			}
			if !ok {
				missing += fmt.Sprintf("%s >= %g; ", name, min)
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			var ours []string
			for _, line := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(line, "fairway_") {
					ours = append(ours, line)
				}
			}
			t.Fatalf("%s: no %s within %s; it has:\n%s", url, missing, waitTimeout, strings.Join(ours, "\n"))
		}
		time.Sleep(50 * time.Millisecond) // metrics have no event to await
	}
}

// TestExecutorStoppedWhileRegisteringExitsCleanly: an executor stopped
// (Ctrl-C, SIGTERM) while it waits for a coordinator to answer its
// registration exits 0, not with "no coordinator answered: context
// canceled" and 1 (fairway dev stopped early exited so).
func TestExecutorStoppedWhileRegisteringExitsCleanly(t *testing.T) {
	ns, _ := natstest.Start(t) // no coordinator
	stderr := &devtest.Output{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, nil, []string{"executor", "--nats-url", ns.ClientURL(), "--app-id", "w-stop", "--http-addr", "", "--log-format", "json"},
			&bytes.Buffer{}, stderr)
	}()
	select {
	case <-stderr.Seen("waiting for a coordinator"):
	case code := <-done:
		t.Fatalf("the executor exited with %d before it waited:\n%s", code, stderr)
	case <-time.After(waitTimeout):
		t.Fatalf("the executor never waited for a coordinator:\n%s", stderr)
	}
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(waitTimeout):
		t.Fatal("the executor did not stop")
	}
}
