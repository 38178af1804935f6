package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/config"
	"github.com/fairwayhq/fairway/internal/devtest"
	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	pid := cmd.Process.Pid
	require.False(t, processAlive(pid), "pid %d was reused at once", pid)
	return pid
}

// loadConfig loads the configuration of a command with nats.url and
// dev.dir from args and environ, as withConfig does.
func loadConfig(t *testing.T, environ []string, args ...string) *config.Config {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.AddFlags(fs, "nats.url", "dev.dir")
	require.NoError(t, fs.Parse(args))
	cfg, err := config.Load("", environ, fs)
	require.NoError(t, err)
	return cfg
}

func TestWriteDevState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, devStateName)
	st := devState{PID: 42, NATSURL: "nats://127.0.0.1:4333", Started: time.Unix(1700000000, 0).UTC()}
	require.NoError(t, writeDevState(path, devState{PID: 1, NATSURL: "nats://127.0.0.1:1"}))
	require.NoError(t, writeDevState(path, st)) // replaces it
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	got, err := readDevState(path)
	require.NoError(t, err)
	require.Equal(t, st.PID, got.PID)
	require.Equal(t, st.NATSURL, got.NATSURL)
	require.True(t, st.Started.Equal(got.Started))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "a temporary file was left behind")
}

// TestFollowDev: a command without nats.url of its own uses the NATS URL
// recorded by a live fairway dev in its dev dir; a stale record (its
// process gone), a broken one, or nats.url given by the user is not
// followed.
func TestFollowDev(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	live, stale, broken, none := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	const devURL = "nats://127.0.0.1:4333"
	require.NoError(t, writeDevState(filepath.Join(live, devStateName), devState{PID: os.Getpid(), NATSURL: devURL}))
	require.NoError(t, writeDevState(filepath.Join(stale, devStateName), devState{PID: deadPID(t), NATSURL: devURL}))
	require.NoError(t, os.WriteFile(filepath.Join(broken, devStateName), []byte("{"), 0o600))

	for _, tc := range []struct {
		name    string
		environ []string
		args    []string
		url     string
		source  string
	}{
		{"live", nil, []string{"--dev-dir", live}, devURL, config.SourceDevDir},
		{"live, dev dir from the environment", []string{"FAIRWAY_DEV_DIR=" + live}, nil, devURL, config.SourceDevDir},
		{"stale", nil, []string{"--dev-dir", stale}, "nats://127.0.0.1:4222", config.SourceDefault},
		{"broken", nil, []string{"--dev-dir", broken}, "nats://127.0.0.1:4222", config.SourceDefault},
		{"none", nil, []string{"--dev-dir", none}, "nats://127.0.0.1:4222", config.SourceDefault},
		{"explicit flag wins", nil, []string{"--dev-dir", live, "--nats-url", "nats://127.0.0.1:4999"}, "nats://127.0.0.1:4999", config.SourceFlag},
		{"explicit flag equal to the default wins", nil, []string{"--dev-dir", live, "--nats-url", "nats://127.0.0.1:4222"}, "nats://127.0.0.1:4222", config.SourceFlag},
		{"explicit env wins", []string{"FAIRWAY_NATS_URL=nats://127.0.0.1:4998"}, []string{"--dev-dir", live}, "nats://127.0.0.1:4998", config.SourceEnv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadConfig(t, tc.environ, tc.args...)
			require.NoError(t, followDev(cfg, log))
			require.Equal(t, tc.url, cfg.NATS.URL)
			require.Equal(t, tc.source, cfg.Source("nats.url"))
		})
	}
}

// TestConfigPrintShowsDevURL: config print says where nats.url came from;
// at debug level the log says why a stale record was not followed.
func TestConfigPrintShowsDevURL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, devStateName)
	require.NoError(t, writeDevState(path, devState{PID: os.Getpid(), NATSURL: "nats://127.0.0.1:4333"}))
	t.Setenv("FAIRWAY_DEV_DIR", dir)
	var out, errOut bytes.Buffer
	require.Equal(t, 0, Main(t.Context(), nil, []string{"config", "print"}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "nats.url: nats://127.0.0.1:4333 # dev-dir\n")

	require.NoError(t, writeDevState(path, devState{PID: deadPID(t), NATSURL: "nats://127.0.0.1:4333"}))
	out.Reset()
	errOut.Reset()
	require.Equal(t, 0, Main(t.Context(), nil, []string{"config", "print", "--log-level", "debug", "--log-format", "text"}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "nats.url: nats://127.0.0.1:4222 # default\n")
	require.Contains(t, errOut.String(), "ignoring a stale record of fairway dev")
}

// TestRecordDevRemovesOnlyItsOwn: a dev that stops removes its record,
// but not one another dev of the same dir wrote meanwhile.
func TestRecordDevRemovesOnlyItsOwn(t *testing.T) {
	t.Parallel()
	e := &env{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	dir := t.TempDir()
	path := filepath.Join(dir, devStateName)
	remove := e.recordDev(dir, "nats://127.0.0.1:4333")
	st, err := readDevState(path)
	require.NoError(t, err)
	require.Equal(t, devState{PID: os.Getpid(), NATSURL: "nats://127.0.0.1:4333", Started: st.Started}, st)
	remove()
	require.NoFileExists(t, path)

	remove = e.recordDev(dir, "nats://127.0.0.1:4333")
	require.NoError(t, writeDevState(path, devState{PID: os.Getpid(), NATSURL: "nats://127.0.0.1:4444"}))
	remove()
	require.FileExists(t, path)
}

// TestCommandsFindDevOnItsPort runs fairway dev with its NATS on a port
// other than 4222 and tenants, then provisions an executor and uses the
// client commands against it given only its dev dir (issue 20).
func TestCommandsFindDevOnItsPort(t *testing.T) {
	dir := devtest.Dir(t, "fairway-dev-record-")
	natsPort, pgPort := devtest.FreePort(t), devtest.FreePort(t)
	require.NotEqual(t, 4222, natsPort)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	dev := StartDev(t, "Fairway is running with tenant isolation", "--dev-dir", dir, "--nats-addr", fmt.Sprintf("127.0.0.1:%d", natsPort),
		"--pg-port", fmt.Sprint(pgPort), "--http-addr", "", "--web-addr", "", "--log-format", "json", "--tenants", "acme",
		"--app-id", "dev-worker")
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), nil, args, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	creds := func(name string) string { return filepath.Join(dir, "creds", name+".creds") }

	// The record: where this process's NATS listens, for nobody else to read.
	record := filepath.Join(dir, devStateName)
	info, err := os.Stat(record)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	st, err := readDevState(record)
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), st.PID)
	require.Equal(t, natsURL, st.NATSURL)

	// A new executor, provisioned against the running dev without --nats-url.
	code, out, errOut := run("creds", "add", "executor", "w2", "--tasks", "echo", "--groups", "acme", "--dev-dir", dir)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, creds("executor-w2"), strings.TrimSpace(out))
	enc, err := nats.Connect(natsURL, nats.UserCredentials(creds("executor-w2")))
	require.NoError(t, err, "the new executor's account was not pushed to the dev")
	defer enc.Close()
	data, err := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{AppID: "w2", Instance: "i", Slots: 1, Tasks: []string{"echo"}}})
	require.NoError(t, err)
	msg, err := enc.Request("fairway.exec.w2.register", data, 10*time.Second)
	require.NoError(t, err, "the new executor cannot register")
	var reply events.Reply
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	require.Nil(t, reply.Error)

	// The client commands, with the dev dir as a flag or from the environment.
	code, out, errOut = run("submit", "echo", "--group", "acme", "--dev-dir", dir, "--creds", creds("tenant-acme"))
	require.Equal(t, 0, code, errOut)
	id := strings.TrimSpace(out)
	code, out, errOut = run("jobs", "list", "--dev-dir", dir, "--creds", creds("operator"))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, id)
	t.Setenv("FAIRWAY_DEV_DIR", dir)
	code, out, errOut = run("jobs", "list", "--creds", creds("operator"), "--log-level", "debug", "--log-format", "json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, id)
	require.Contains(t, errOut, "nats.url from the running fairway dev")
	code, out, errOut = run("config", "print")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "nats.url: "+natsURL+" # dev-dir\n")

	// An explicit --nats-url wins, even where nothing listens.
	code, _, errOut = run("jobs", "list", "--nats-url", "nats://"+closedLoopbackAddr(t), "--creds", creds("operator"))
	require.Equal(t, 1, code)
	require.NotContains(t, errOut, "recorded in")

	dev.Stop(t)
	require.NoFileExists(t, record, "fairway dev left its record behind")
}

// closedLoopbackAddr returns a loopback host:port nothing listens on.
func closedLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
