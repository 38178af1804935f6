package cli_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/cli"
	"github.com/fairwayhq/fairway/internal/devtest"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// devArgs are the flags of a fairway dev in dir on its own ports, with no
// HTTP endpoint and no dashboard.
func devArgs(dir string, natsPort, pgPort int, more ...string) []string {
	return append([]string{"--dev-dir", dir, "--nats-addr", fmt.Sprintf("127.0.0.1:%d", natsPort), "--pg-port", fmt.Sprint(pgPort),
		"--http-addr", "", "--web-addr", "", "--log-format", "json"}, more...)
}

// devClient connects a client to the NATS of a fairway dev.
func devClient(t *testing.T, natsURL string) *events.Client {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	return client
}

// awaitStates polls the jobs until each is in state, for at most a
// minute (a job submitted through the submit stream may not be stored yet).
func awaitStates(t *testing.T, client *events.Client, group string, ids []string, state fairway.State) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for _, id := range ids {
		for {
			job, err := client.Get(t.Context(), group, id)
			if err == nil && job.State == state {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s is not %s after %s: %+v, %v", id, state, waitTimeout, job, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// linesWith returns the lines of out that contain one of subs.
func linesWith(out string, subs ...string) []string {
	var found []string
	for _, line := range strings.Split(out, "\n") {
		for _, sub := range subs {
			if strings.Contains(line, sub) {
				found = append(found, line)
				break
			}
		}
	}
	return found
}

// TestDevDoubleSignalReleasesRunningJobs stops a fairway dev that runs
// jobs with two signals in quick succession, as a double Ctrl-C does: the
// running jobs are released (back to waiting, no attempt counted), their
// log lines are stored, and dev exits 0. Then dev starts again on the same
// directory: no job comes back stuck as "executor lost: it restarted", and
// each one's first attempt has its log, to its last line. Before, dev
// stopped its coordinator without waiting for it to apply the executor's
// last reports: they stayed in JetStream, the executor's restart took the
// jobs as lost, counting an attempt, and a batch cut short by the stop lost
// its log lines ("dropping job log lines PostgreSQL refused … context
// canceled").
func TestDevDoubleSignalReleasesRunningJobs(t *testing.T) {
	dir := devtest.Dir(t, "fairway-dev-")
	natsPort, pgPort := devtest.FreePort(t), devtest.FreePort(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	const n = 40
	args := devArgs(dir, natsPort, pgPort, "--pool-size", fmt.Sprint(n))
	dev := cli.StartDev(t, "Fairway is running", args...)
	client := devClient(t, natsURL)
	subs := make([]fairway.Submission, n)
	for i := range subs {
		subs[i] = fairway.Submission{Group: "acme", Task: "sleep", Args: json.RawMessage(`{"seconds":3600}`)}
	}
	ids, err := client.SubmitMany(t.Context(), subs)
	require.NoError(t, err)
	awaitStates(t, client, "acme", ids, fairway.StateRunning)

	dev.Signal()
	dev.Stderr.Wait(t, "executor draining", waitTimeout)
	dev.Signal()
	stopped := time.Now()
	code := dev.Code(t)
	out := dev.Stderr.String()
	require.Equal(t, 0, code, out)
	require.Less(t, time.Since(stopped), 15*time.Second, "a second signal stops dev promptly\n%s", out)
	require.Contains(t, out, fmt.Sprintf("second signal: cancelling %d running jobs; they return to waiting", n))
	require.Empty(t, linesWith(out, "PostgreSQL refused"), "a stop is no refusal by PostgreSQL")
	require.Empty(t, linesWith(out, "dropping", "dropped"), "no report and no log line is dropped")

	// Dev again, on the same directory: the jobs were released.
	dev = cli.StartDev(t, "Fairway is running", args...)
	dev.Stderr.Wait(t, "executor started", waitTimeout)
	client = devClient(t, natsURL)
	for _, id := range ids {
		job, err := client.Get(t.Context(), "acme", id)
		require.NoError(t, err)
		require.Equal(t, 0, job.Retries, "job %s: a released job has not failed an attempt (%s, %s)", id, job.State, job.Error)
		require.NotContains(t, job.Error, "executor lost", "job %s", id)
		require.NotEqual(t, fairway.StateStuck, job.State, "job %s", id)
		logs, err := client.Logs(t.Context(), "acme", id)
		require.NoError(t, err)
		var first []string
		for _, l := range logs {
			if l.Attempt == 1 {
				first = append(first, l.Message)
			}
		}
		require.Contains(t, strings.Join(first, "\n"), "attempt ends", "job %s: the last line of its first attempt is stored", id)
	}
	require.Empty(t, linesWith(dev.Stderr.String(), "it restarted"))
	// The jobs run again; two signals stop this dev too, without waiting
	// for them.
	awaitStates(t, client, "acme", ids, fairway.StateRunning)
	dev.Signal()
	dev.Signal()
	require.Equal(t, 0, dev.Code(t), dev.Stderr.String())
}

// TestSecondDevOnALiveDevDirRefusesAtOnce starts a fairway dev, then a
// second one on the same directory (on other ports): the second exits 1
// before it starts anything, naming the first one's pid and NATS URL and
// what to do, and the first one goes on running jobs. Once the first has
// stopped, a dev starts on the directory again. Before, the second started
// NATS on the first one's data (its JetStream store rebuilt: "Stream state
// outdated"), then quit because PostgreSQL ran, advising to remove the
// live server's pid file.
func TestSecondDevOnALiveDevDirRefusesAtOnce(t *testing.T) {
	dir := devtest.Dir(t, "fairway-dev-")
	natsPort, pgPort := devtest.FreePort(t), devtest.FreePort(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	dev := cli.StartDev(t, "Fairway is running", devArgs(dir, natsPort, pgPort)...)
	dev.Stderr.Wait(t, "executor started", waitTimeout)

	start := time.Now()
	code, _, errOut := run(t, append([]string{"dev"}, devArgs(dir, devtest.FreePort(t), devtest.FreePort(t))...)...)
	require.Equal(t, 1, code, errOut)
	require.Less(t, time.Since(start), 5*time.Second, "refused at once")
	require.Contains(t, errOut, "fairway: dev dir "+dir+" is in use by another fairway dev (pid "+fmt.Sprint(os.Getpid())+", NATS at "+natsURL+", started ")
	require.Contains(t, errOut, "nothing was started")
	require.Contains(t, errOut, fmt.Sprintf("kill %d", os.Getpid()))
	require.Contains(t, errOut, "another --dev-dir")
	require.Contains(t, errOut, "--dev-dir "+dir)
	require.Empty(t, linesWith(errOut, `"msg":`), "the second dev started nothing: it logged nothing")

	// The first one runs on, untouched: a job runs, its events flow.
	client := devClient(t, natsURL)
	id, err := client.Submit(t.Context(), fairway.Submission{Group: "acme", Task: "echo"})
	require.NoError(t, err)
	require.Equal(t, fairway.StateSuccess, finalEvent(t, client, "acme", id).State)
	require.Empty(t, linesWith(dev.Stderr.String(), "outdated", "rebuild"))
	dev.Stop(t)

	// Stopped, it let the directory go.
	dev = cli.StartDev(t, "Fairway is running", devArgs(dir, natsPort, pgPort)...)
	job, err := devClient(t, natsURL).Get(t.Context(), "acme", id)
	require.NoError(t, err)
	require.Equal(t, fairway.StateSuccess, job.State)
	dev.Stop(t)
}

// shellWords splits a command line as a POSIX shell does, for the lines
// fairway dev prints: words apart by spaces, single quotes taken literally.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var word strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			word.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	require.False(t, quoted, "unbalanced quote in %q", line)
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// TestDevPrintsCommandsThatWork runs fairway dev with NATS on another port
// than 4222 and a dev dir of its own, then runs the commands its banner
// prints for a second terminal exactly as printed: with the environment
// its export lines set, from another directory. And the dashboard's login
// page names the token file in that dev dir. Before, the banner left the
// address out (the commands went to 4222 and found nothing), and the login
// page named .fairway/web-admin.token whatever --dev-dir was.
func TestDevPrintsCommandsThatWork(t *testing.T) {
	dir := devtest.Dir(t, "fairway-dev-")
	natsPort, pgPort, webPort := devtest.FreePort(t), devtest.FreePort(t), devtest.FreePort(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	dev := cli.StartDev(t, "Fairway is running", "--dev-dir", dir, "--nats-addr", fmt.Sprintf("127.0.0.1:%d", natsPort),
		"--pg-port", fmt.Sprint(pgPort), "--http-addr", "", "--web-addr", fmt.Sprintf("127.0.0.1:%d", webPort), "--log-format", "json")
	dev.Stderr.Wait(t, "Ctrl-C stops everything", waitTimeout)
	dev.Stderr.Wait(t, "executor started", waitTimeout)
	out := dev.Stderr.String()
	_, banner, ok := strings.Cut(out, "From a second terminal:\n")
	require.True(t, ok, out)
	banner, _, ok = strings.Cut(banner, "\n(with 'go run")
	require.True(t, ok, out)

	env := map[string]string{}
	var commands [][]string
	for _, line := range strings.Split(banner, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "export "):
			words := shellWords(t, strings.TrimPrefix(line, "export "))
			require.Len(t, words, 1, line)
			name, value, ok := strings.Cut(words[0], "=")
			require.True(t, ok, line)
			env[name] = value
		case strings.HasPrefix(line, "fairway "):
			commands = append(commands, shellWords(t, line)[1:])
		}
	}
	require.Equal(t, map[string]string{"FAIRWAY_NATS_URL": natsURL}, env, banner)
	require.NotEmpty(t, commands)

	// A second terminal: another directory, the printed environment.
	t.Chdir(t.TempDir())
	for name, value := range env {
		t.Setenv(name, value)
	}
	var ids []string
	for _, args := range commands {
		if args[0] == "events" && args[1] == "tail" {
			continue // it follows the events until stopped
		}
		code, stdout, stderr := run(t, args...)
		require.Equal(t, 0, code, "fairway %s\n%s", strings.Join(args, " "), stderr)
		if args[0] == "submit" {
			ids = append(ids, strings.TrimSpace(stdout))
		} else if args[0] == "jobs" && args[1] == "list" {
			for _, id := range ids {
				require.Contains(t, stdout, id)
			}
		}
	}
	require.NotEmpty(t, ids)

	// The login page names the token file of this dev dir.
	res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", webPort))
	require.NoError(t, err)
	page, err := io.ReadAll(res.Body)
	res.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(page), "The admin token is in <code>"+filepath.Join(dir, "web-admin.token")+"</code>")
	require.Contains(t, string(page), "the read-only token is in <code>"+filepath.Join(dir, "web-read.token")+"</code>")
	require.NotContains(t, string(page), ".fairway/")
	dev.Signal()
	dev.Signal()
	require.Equal(t, 0, dev.Code(t), dev.Stderr.String())
}
