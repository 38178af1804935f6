package cli_test

import (
	"encoding/json"
	"fmt"
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

// TestDevWithTenants runs `fairway dev --tenants` and uses the credentials
// it writes as a tenant, an operator and a new executor would, with the
// client commands and a stock NATS connection given nothing but the file.
func TestDevWithTenants(t *testing.T) {
	dir, err := os.MkdirTemp("", "fairway-dev-tenants-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { require.NoError(t, os.RemoveAll(dir)) })
	natsPort, pgPort := devtest.FreePort(t), devtest.FreePort(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	dev := cli.StartDev(t, "Fairway is running with tenant isolation", "--dev-dir", dir, "--nats-addr", fmt.Sprintf("127.0.0.1:%d", natsPort),
		"--pg-port", fmt.Sprint(pgPort), "--http-addr", "", "--web-addr", "", "--log-format", "json", "--tenants", "acme,globex",
		"--app-id", "dev-worker")
	stderr := dev.Stderr
	// Without --retry-delay, dev retries after 5 s, not a minute.
	stderr.Wait(t, `"retry_delay":"5s"`, waitTimeout)
	creds := func(name string) string { return filepath.Join(dir, "creds", name+".creds") }
	for _, name := range []string{"tenant-acme", "tenant-globex", "operator", "executor-dev-worker"} {
		info, err := os.Stat(creds(name))
		require.NoError(t, err, name)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), name)
	}

	// Without a credential, nothing answers.
	_, err = nats.Connect(natsURL)
	require.Error(t, err, "connected without a credential")

	code, out, errOut := run(t, "submit", "echo", "--group", "acme", "--args", `{"n":1}`, "--nats-url", natsURL, "--creds", creds("tenant-acme"))
	require.Equal(t, 0, code, errOut)
	id := strings.TrimSpace(out)

	// globex's credential cannot submit for acme, read acme's job or use
	// the operator API.
	code, _, errOut = run(t, "submit", "echo", "--group", "acme", "--nats-url", natsURL, "--creds", creds("tenant-globex"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "only its own group")
	code, _, _ = run(t, "jobs", "show", id, "--group", "acme", "--nats-url", natsURL, "--creds", creds("tenant-globex"))
	require.Equal(t, 1, code)
	// Without --group, a tenant's credential means its own group: globex
	// lists its own jobs (none), not acme's, and the operator API is not
	// asked (it would answer "no responders").
	code, out, errOut = run(t, "jobs", "list", "--nats-url", natsURL, "--creds", creds("tenant-globex"))
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, id)
	code, out, errOut = run(t, "submit", "echo", "--args", `{"n":2}`, "--nats-url", natsURL, "--creds", creds("tenant-acme"))
	require.Equal(t, 0, code, "acme submits without --group: %s", errOut)
	second := strings.TrimSpace(out)
	code, out, errOut = run(t, "jobs", "show", second, "--nats-url", natsURL, "--creds", creds("tenant-acme"))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"group": "acme"`)
	code, out, errOut = run(t, "jobs", "list", "--nats-url", natsURL, "--creds", creds("tenant-acme"))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, id)
	require.Contains(t, out, second)
	// The operator's credential names no group: a job command says so.
	code, _, errOut = run(t, "jobs", "show", second, "--nats-url", natsURL, "--creds", creds("operator"))
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--group is required: job ids are unique per group only")

	// The operator sees every group's jobs; the job ran.
	code, out, errOut = run(t, "jobs", "list", "--nats-url", natsURL, "--creds", creds("operator"))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, id)

	// acme follows its own events with a stock connection and the file.
	nc, err := nats.Connect(natsURL, nats.UserCredentials(creds("tenant-acme")))
	require.NoError(t, err)
	defer nc.Close()
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	final := make(chan events.Event, 10)
	sub, err := client.Subscribe(t.Context(), events.Filter{Since: time.Unix(0, 0)}, func(ev events.Event) {
		if ev.State.Final() {
			final <- ev
		}
	})
	require.NoError(t, err)
	defer sub.Stop()
	// Its two jobs' final events, in the order they finished (the second
	// may finish first: CI saw it once), and none of another group's.
	timeout := time.After(30 * time.Second)
	for seen := map[string]bool{}; !seen[id]; {
		select {
		case ev := <-final:
			require.Contains(t, []string{id, second}, ev.JobID, "only acme's own jobs")
			require.Equal(t, fairway.StateSuccess, ev.State, "job %s", ev.JobID)
			seen[ev.JobID] = true
		case <-timeout:
			t.Fatal("acme's job did not finish within 30s")
		}
	}

	// A new tenant and a new executor, provisioned against the running dev.
	code, out, errOut = run(t, "creds", "add", "tenant", "initech", "--dev-dir", dir, "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, creds("tenant-initech"), strings.TrimSpace(out))
	inc, err := nats.Connect(natsURL, nats.UserCredentials(creds("tenant-initech")))
	require.NoError(t, err)
	defer inc.Close()
	msg, err := inc.Request("fairway.api.initech.list", []byte(`{}`), 10*time.Second)
	require.NoError(t, err, "the new tenant's API is not reachable")
	var reply events.Reply
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	require.Nil(t, reply.Error)
	// Without saying what it may run, an executor credential is refused.
	code, _, errOut = run(t, "creds", "add", "executor", "worker-2", "--dev-dir", dir, "--nats-url", natsURL)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--tasks a,b or --any-task; --groups g1,g2 or --any-group")
	require.NoFileExists(t, creds("executor-worker-2"))
	code, out, errOut = run(t, "creds", "add", "executor", "worker-2", "--any-task", "--any-group", "--dev-dir", dir, "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, creds("executor-worker-2"), strings.TrimSpace(out))
	enc, err := nats.Connect(natsURL, nats.UserCredentials(creds("executor-worker-2")))
	require.NoError(t, err)
	defer enc.Close()
	data, err := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{AppID: "worker-2", Instance: "i", Slots: 1, Tasks: []string{"echo"}}})
	require.NoError(t, err)
	msg, err = enc.Request("fairway.exec.worker-2.register", data, 10*time.Second)
	require.NoError(t, err, "the new executor cannot register")
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	require.Nil(t, reply.Error)
	_, err = enc.Request("fairway.exec.dev-worker.register", data, time.Second)
	require.ErrorIs(t, err, nats.ErrNoResponders, "an executor reached another executor's subjects")
	made, err := filepath.Glob(filepath.Join(dir, "*", "account-TENANT_worker-2.nk"))
	require.NoError(t, err)
	require.Empty(t, made, "creds add executor made a tenant account of the same name")
	made, err = filepath.Glob(filepath.Join(dir, "*", "account-EXECUTOR_worker-2.nk"))
	require.NoError(t, err)
	require.Len(t, made, 1, "the executor's own account key")

	// A credential that states what it may run: registering more is
	// refused, with what it grants.
	code, out, errOut = run(t, "creds", "add", "executor", "mailer", "--tasks", "echo", "--groups", "acme", "--slots", "1", "--dev-dir", dir, "--nats-url", natsURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "tasks echo, groups acme, slots 1")
	mnc, err := nats.Connect(natsURL, nats.UserCredentials(strings.TrimSpace(out)))
	require.NoError(t, err)
	defer mnc.Close()
	data, err = json.Marshal(events.RegisterRequest{Executor: fairway.Executor{AppID: "mailer", Instance: "i", Slots: 2, Tasks: []string{"echo"}}})
	require.NoError(t, err)
	msg, err = mnc.Request("fairway.exec.mailer.register", data, 10*time.Second)
	require.NoError(t, err)
	reply = events.Reply{}
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	require.NotNil(t, reply.Error, "registered 2 slots with a credential granting 1")
	require.Contains(t, reply.Error.Message, "at most 1 slots")
	code, _, errOut = run(t, "creds", "add", "tenant", "initech", "--slots", "1", "--dev-dir", dir, "--nats-url", natsURL)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "not a tenant's")

	// What each executor credential may run: dev's own is narrow (the
	// demo tasks of its tenants), worker-2's wide, as asked.
	code, out, errOut = run(t, "creds", "list", "--dev-dir", dir)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^dev-worker +1 +\S+ +tasks echo,sleep,fail,panic,snooze; groups acme,globex +valid$`, out)
	require.Regexp(t, `(?m)^worker-2 +1 +\S+ +any task, any group \(wide\) +valid$`, out)
	require.Regexp(t, `(?m)^mailer +1 +\S+ +tasks echo; groups acme, at most 1 slot +valid$`, out)
	require.Regexp(t, `(?m)^initech +256 +10000 +8MiB +`, out)

	dev.Stop(t)
}
