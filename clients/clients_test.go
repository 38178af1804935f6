// Package clients_test runs the executor conformance suite
// (conformance/README.md) against the Go, Python and TypeScript executors, the
// Python and TypeScript packages' own tests and the quickstarts of their docs, on two real `fairway dev`
// clusters: one without authentication, one with isolated tenants.
package clients_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/devtest"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// waitTimeout bounds every wait: generous, since the machine is shared.
const waitTimeout = 2 * time.Minute

// root is the repository's root, from this package's directory.
var root = ".."

// TestClients builds fairway, nats-server and the Go conformance
// executor, starts the two clusters once, and runs the packages' tests
// and the conformance suite against them.
func TestClients(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator),
		"github.com/fairwayhq/fairway/cmd/fairway",
		"github.com/nats-io/nats-server/v2",
		"github.com/fairwayhq/fairway/clients/conformance/goexecutor")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	fairwayBin := filepath.Join(bin, "fairway")

	python := pythonPath(t)
	node, npm := lookPath(t, "node"), lookPath(t, "npm")
	tsDir := filepath.Join(root, "clients", "typescript")
	// npm ci, then the package's build (its dist/ is what users install,
	// and what its conformance program imports): once, for the subtests
	// that need it.
	var tsBuild struct {
		sync.Once
		err error
	}
	buildTS := func(t *testing.T) {
		tsBuild.Do(func() {
			for _, args := range [][]string{{"ci", "--no-audit", "--no-fund"}, {"run", "build"}} {
				cmd := exec.Command(npm, args...)
				cmd.Dir = tsDir
				if out, err := cmd.CombinedOutput(); err != nil {
					tsBuild.err = fmt.Errorf("npm %s in clients/typescript: %v\n%s", strings.Join(args, " "), err, out)
					return
				}
			}
		})
		require.NoError(t, tsBuild.err)
	}

	plain := startDev(t, fairwayBin)
	tenants := startDev(t, fairwayBin, "--tenants", "acme,globex")
	// The packages' own tests' executor credentials (their READMEs).
	addExecutorCreds(t, fairwayBin, tenants, "ts", "ts-echo")
	addExecutorCreds(t, fairwayBin, tenants, "py", "py-echo")

	testEnv := append(os.Environ(),
		"FAIRWAY_TEST_NATS_URL="+plain.NATSURL,
		"FAIRWAY_TEST_TENANTS_NATS_URL="+tenants.NATSURL,
		"FAIRWAY_TEST_CREDS_DIR="+filepath.Join(tenants.Dir, "creds"),
		"NATS_SERVER_BIN="+filepath.Join(bin, "nats-server"),
		"FAIRWAY_BIN="+fairwayBin,
	)
	pyDir := filepath.Join(root, "clients", "python")
	t.Run("python-package", func(t *testing.T) {
		runTests(t, testEnv, pyDir, python, "-m", "unittest", "discover", "-s", "tests", "-v")
	})
	t.Run("typescript-package", func(t *testing.T) {
		buildTS(t)
		runTests(t, testEnv, tsDir, npm, "test")
	})

	t.Run("typescript-quickstart", func(t *testing.T) {
		buildTS(t)
		code := quickstart(t, "typescript.md", "js", filepath.Join(tsDir, "README.md"))
		// The package as a newcomer installs it: packed (npm builds it),
		// then installed into an empty project.
		dir := t.TempDir()
		pack := exec.Command(npm, "pack", "--pack-destination", dir)
		pack.Dir = tsDir
		out, err := pack.Output()
		require.NoError(t, err, "npm pack: %s", out)
		tgz := filepath.Join(dir, strings.TrimSpace(lastLine(string(out))))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"hello","private":true,"type":"module"}`), 0o600))
		install := exec.Command(npm, "install", "--no-audit", "--no-fund", tgz)
		install.Dir = dir
		out, err = install.CombinedOutput()
		require.NoError(t, err, "npm install %s: %s", tgz, out)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "hello.js"), []byte(strings.ReplaceAll(code, devURL, plain.NATSURL)), 0o600))
		ran := runProgram(t, dir, nil, node, "hello.js")
		require.Contains(t, ran, "success", "the quickstart's job succeeded")
		require.Contains(t, ran, "hello, ada")
	})
	t.Run("python-quickstart", func(t *testing.T) {
		code := quickstart(t, "python.md", "python", filepath.Join(pyDir, "README.md"))
		// The package as a newcomer installs it: into a virtual
		// environment (with the system's packages: PyNaCl), from the
		// repository, offline.
		dir := t.TempDir()
		venv := filepath.Join(dir, "venv")
		runProgram(t, dir, nil, python, "-m", "venv", "--system-site-packages", venv)
		pkg, err := filepath.Abs(pyDir)
		require.NoError(t, err)
		runProgram(t, dir, nil, filepath.Join(venv, "bin", "pip"), "install", "--quiet", "--no-build-isolation", "--no-index", pkg)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "hello.py"), []byte(strings.ReplaceAll(code, devURL, plain.NATSURL)), 0o600))
		out := runProgram(t, dir, nil, filepath.Join(venv, "bin", "python"), "hello.py")
		require.Contains(t, out, "success", "the quickstart's job succeeded")
		require.Contains(t, out, "hello, ada")
	})

	// fairway bench runs the short-jobs scenario on each package's
	// executor (a small run: the figures are performance.md's).
	for _, kind := range []string{"python", "node"} {
		t.Run("bench-"+kind, func(t *testing.T) {
			if kind == "node" {
				buildTS(t)
			}
			out := runProgram(t, root, []string{"PATH=" + filepath.Dir(python) + string(os.PathListSeparator) + os.Getenv("PATH")},
				fairwayBin, "bench", "--database-url", plain.databaseURL(t), "--scenario", "short-jobs", "--short-jobs", "300", "--executor", kind, "--json")
			var res struct {
				Scenario string  `json:"scenario"`
				Jobs     int     `json:"jobs"`
				Busy     float64 `json:"busy_share"`
				Executor float64 `json:"cpu_us_per_job_executor"`
			}
			line := lastLine(out)
			require.NoError(t, json.Unmarshal([]byte(line), &res), "the bench's last line: %s", out)
			require.Equal(t, "short-jobs", res.Scenario)
			require.Equal(t, 300, res.Jobs)
			require.Positive(t, res.Busy, "%s", line)
			require.Positive(t, res.Executor, "the executor's own process is measured: %s", line)
		})
	}

	executors := []executorProgram{
		{lang: "go", cmd: []string{filepath.Join(bin, "goexecutor")}},
		{lang: "python", cmd: []string{python, filepath.Join(pyDir, "conformance_executor.py")},
			env: []string{"PYTHONPATH=" + filepath.Join(pyDir, "src")}},
		{lang: "typescript", cmd: []string{node, filepath.Join(tsDir, "conformance-executor.mjs")}, setup: buildTS},
	}
	for _, ex := range executors {
		t.Run("conformance/"+ex.lang, func(t *testing.T) {
			if ex.setup != nil {
				ex.setup(t)
			}
			t.Run("plain", func(t *testing.T) { conformance(t, plain, ex) })
			t.Run("tenants", func(t *testing.T) { conformanceTenants(t, fairwayBin, tenants, ex) })
		})
	}
}

// devURL is the NATS URL of `fairway dev` in the docs' quickstarts, which
// the tests replace with their own dev's.
const devURL = "nats://127.0.0.1:4222"

// quickstart returns the first code block of lang under the heading
// "Quickstart" of docs/<doc>, and requires the package's README to hold
// the same block: one text, tested here, in both.
func quickstart(t *testing.T, doc, lang, readme string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "docs", doc))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)\n## Quickstart\n.*?```" + lang + "\n(.*?)```").FindSubmatch(data)
	require.NotNil(t, m, "docs/%s has a ```%s block under ## Quickstart", doc, lang)
	code := string(m[1])
	require.Contains(t, code, devURL, "the quickstart connects to fairway dev's NATS")
	pkg, err := os.ReadFile(readme)
	require.NoError(t, err)
	require.Contains(t, string(pkg), code, "%s holds the quickstart of docs/%s, word for word", readme, doc)
	return code
}

// runProgram runs a program in dir with a deadline, requires exit status
// 0 and returns its output.
func runProgram(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
	return string(out)
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// runTests runs a package's test command in dir and fails t with its
// output when it fails; the output is logged either way.
func runTests(t *testing.T, env []string, dir, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s in %s:\n%s", filepath.Base(name), strings.Join(args, " "), dir, out)
	require.NoError(t, err, "the tests in %s failed (output above)", dir)
}

// executorProgram is one language's conformance executor: the command
// that runs it, before the suite's flags.
type executorProgram struct {
	lang  string
	cmd   []string
	env   []string
	setup func(*testing.T) // before it runs, if set
}

// runningExecutor is a started conformance executor.
type runningExecutor struct {
	*devtest.Process
	instance string
}

// start runs the executor with the suite's flags and waits until it has
// registered.
func (p executorProgram) start(t *testing.T, args ...string) *runningExecutor {
	t.Helper()
	r := p.launch(t, args...)
	r.WaitFor(t, "conformance: registered ")
	// Its line may still be arriving: wait for its end.
	r.Out.Wait(t, "\n", waitTimeout)
	m := regexp.MustCompile(`conformance: registered \S+ (\S+)\n`).FindStringSubmatch(r.Out.String())
	require.NotNil(t, m, "the registered line names the instance:\n%s", r.Out)
	r.instance = m[1]
	return r
}

// launch starts the executor without waiting for anything. It is stopped
// as a user would when the test ends (a request it left parked at the
// leader would take the next test's job, and lose it).
func (p executorProgram) launch(t *testing.T, args ...string) *runningExecutor {
	t.Helper()
	cmd := exec.Command(p.cmd[0], append(slices.Clone(p.cmd[1:]), args...)...)
	cmd.Env = append(os.Environ(), p.env...)
	return &runningExecutor{Process: devtest.Start(t, cmd, syscall.SIGTERM)}
}

// signal sends sig to the executor.
func (r *runningExecutor) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	require.NoError(t, r.Cmd.Process.Signal(sig))
}

// dev is a running `fairway dev`, with the suite's helpers.
type dev struct{ *devtest.Dev }

// startDev runs `fairway dev` (retries 1 s after a failure: the suite's
// failing jobs retry within it; leases of 10 s: a frozen executor's job
// is given back within the test; no dashboard).
func startDev(t *testing.T, fairwayBin string, extra ...string) *dev {
	t.Helper()
	return &dev{devtest.StartDev(t, fairwayBin, append([]string{"--http-addr", "", "--web-addr", "",
		"--retry-delay", "1s", "--lease", "10s"}, extra...)...)}
}

// databaseURL is the URL of d's PostgreSQL, as its superuser (whose
// password fairway dev keeps in <dev-dir>/pg.password).
func (d *dev) databaseURL(t *testing.T) string {
	t.Helper()
	pw, err := os.ReadFile(filepath.Join(d.Dir, "pg.password"))
	require.NoError(t, err)
	u := url.URL{Scheme: "postgres", User: url.UserPassword("fairway", strings.TrimSpace(string(pw))),
		Host: fmt.Sprintf("127.0.0.1:%d", d.PGPort), Path: "/postgres", RawQuery: "sslmode=disable"}
	return u.String()
}

// creds is the path of a credential of d.
func (d *dev) creds(name string) string { return filepath.Join(d.Dir, "creds", name+".creds") }

// client connects a Go client to d, with a credential of its when name is
// not empty.
func (d *dev) client(t *testing.T, credsName string) (*events.Client, *nats.Conn) {
	t.Helper()
	var opts []nats.Option
	if credsName != "" {
		opts = append(opts, nats.UserCredentials(d.creds(credsName)))
	}
	nc, err := nats.Connect(d.NATSURL, opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	c, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	return c, nc
}

// addExecutorCreds issues the executor credential <name> of d, granted
// tasks of group acme.
func addExecutorCreds(t *testing.T, fairwayBin string, d *dev, name, tasks string) {
	t.Helper()
	out, err := exec.Command(fairwayBin, "creds", "add", "executor", name, "--tasks", tasks,
		"--groups", "acme", "--dev-dir", d.Dir).CombinedOutput()
	require.NoError(t, err, "creds add executor %s: %s", name, out)
}

// pythonPath is Debian's python3 (with PyNaCl, python3-nacl) when the
// machine has it, else the python3 on PATH.
func pythonPath(t *testing.T) string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return lookPath(t, "python3")
}

// lookPath finds a program the suite needs, or fails saying how to get it.
func lookPath(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("the clients' tests need %s on PATH: install Debian's python3, python3-nacl, nodejs and npm", name)
	}
	return path
}
