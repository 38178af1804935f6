package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// cpuHelperEnv makes the test binary a helper process of the CPU tests
// (see init) instead of running tests.
const cpuHelperEnv = "FAIRWAY_BENCH_CPU_HELPER"

// burnTime is how much CPU time a helper burns in each busy loop.
const burnTime = 300 * time.Millisecond

// init runs the helper processes, before TestMain starts anything:
//   - "busy": waits for a line on stdin, burns burnTime, prints "done",
//     and waits for stdin to close;
//   - "burn": burns burnTime and exits;
//   - "tree": waits for a line on stdin, runs a "burn" child to its end
//     (reaped: its time moves to this process's cutime), starts a "busy"
//     child that burns and stays alive, burns burnTime itself, prints
//     "done", and waits for stdin to close. 3 × burnTime in all.
func init() {
	mode := os.Getenv(cpuHelperEnv)
	if mode == "" {
		return
	}
	in := bufio.NewReader(os.Stdin)
	switch mode {
	case "burn":
		burn(burnTime)
	case "busy":
		_, _ = in.ReadString('\n')
		burn(burnTime)
		fmt.Println("done")
		_, _ = io.Copy(io.Discard, in)
	case "tree":
		_, _ = in.ReadString('\n')
		if err := helper("burn").Run(); err != nil {
			panic(err)
		}
		live := helper("busy")
		stdin, _ := live.StdinPipe()
		stdout, _ := live.StdoutPipe()
		if err := live.Start(); err != nil {
			panic(err)
		}
		if _, err := fmt.Fprintln(stdin, "go"); err != nil {
			panic(err)
		}
		if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "done\n" {
			panic("busy child: " + line)
		}
		burn(burnTime)
		fmt.Println("done")
		_, _ = io.Copy(io.Discard, in)
		_ = stdin.Close() // the child's cue to end: it ends with the test anyway
		_ = live.Wait()
	}
	os.Exit(0)
}

// helper is this test binary as a helper process of the given mode.
func helper(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), cpuHelperEnv+"="+mode)
	cmd.Stderr = os.Stderr
	return cmd
}

// burn keeps a CPU busy until this process has used d more CPU time.
func burn(d time.Duration) {
	start, _ := selfCPU()
	for x := 0; ; x++ {
		if x%100_000 == 0 {
			if now, _ := selfCPU(); now-start >= d {
				return
			}
		}
	}
}

// startHelper starts a helper that waits for a line on stdin; go makes
// it start burning and returns once it reports "done". The helper ends
// with the test.
func startHelper(t *testing.T, mode string) (pid int, run func()) {
	cmd := helper(mode)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close() // the helper's cue to end
		_ = cmd.Wait()
	})
	out := bufio.NewReader(stdout)
	return cmd.Process.Pid, func() {
		_, err := fmt.Fprintln(stdin, "go")
		require.NoError(t, err)
		line, err := out.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "done\n", line)
	}
}

// requireAbout checks a measured CPU time of procs processes against what
// they burnt: at least that less one clock tick of rounding at each end
// for each process (the kernel counts each one's time in ticks; seen 30 ms
// short for three processes on a loaded machine), and at most that plus
// slack (the helpers' own start, which the sampler rightly counts, and
// the runtime's background work).
func requireAbout(t *testing.T, procs int, want, got time.Duration, what string) {
	t.Helper()
	require.GreaterOrEqual(t, got, want-time.Duration(2*procs)*clockTick, "%s: measured %s, burnt %s", what, got, want)
	require.LessOrEqual(t, got, want+250*time.Millisecond, "%s: measured %s, burnt %s", what, got, want)
}

// TestCPUSamplerMeasuresABusyChild: a child process that burns 300 ms of
// CPU between Start and Stop measures about 300 ms; the same process idle
// measures nothing.
func TestCPUSamplerMeasuresABusyChild(t *testing.T) {
	pid, run := startHelper(t, "busy")
	var c cpuSampler
	c.add("child", processCPU(pid))
	c.add("tree", processTreeCPU(pid))
	require.NoError(t, c.Start())
	run()
	got, err := c.Stop()
	require.NoError(t, err)
	requireAbout(t, 1, burnTime, got["child"], "process")
	requireAbout(t, 1, burnTime, got["tree"], "process tree")

	// Idle now: waiting on its stdin.
	require.NoError(t, c.Start())
	time.Sleep(200 * time.Millisecond)
	got, err = c.Stop()
	require.NoError(t, err)
	require.LessOrEqual(t, got["child"], 2*clockTick, "an idle process")
}

// TestCPUSamplerMeasuresAProcessTree: the tree figure counts the process,
// the child it ran and reaped during the phase, and the child still alive
// at its end; the process figure counts the reaped one but not the live
// one.
func TestCPUSamplerMeasuresAProcessTree(t *testing.T) {
	pid, run := startHelper(t, "tree")
	var c cpuSampler
	c.add("tree", processTreeCPU(pid))
	c.add("process", processCPU(pid))
	require.NoError(t, c.Start())
	run()
	got, err := c.Stop()
	require.NoError(t, err)
	requireAbout(t, 3, 3*burnTime, got["tree"], "process tree")
	requireAbout(t, 2, 2*burnTime, got["process"], "process and its reaped child")
}

// TestCPUSamplerMeasuresThisProcess: selfCPU counts this process's busy
// loop with getrusage's precision.
func TestCPUSamplerMeasuresThisProcess(t *testing.T) {
	var c cpuSampler
	c.add("self", selfCPU)
	require.NoError(t, c.Start())
	burn(100 * time.Millisecond)
	got, err := c.Stop()
	require.NoError(t, err)
	require.GreaterOrEqual(t, got["self"], 100*time.Millisecond)
	require.Less(t, got["self"], 300*time.Millisecond)

	var never cpuSampler
	_, err = never.Stop()
	require.Error(t, err)
}

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis, as postgres's
	// processes may have.
	line := "4242 (postgres: a) b) S 4200 4242 4242 0 -1 4194560 1234 0 0 0 150 25 7 3 20 0 1 0 100 0 0"
	st, err := parseProcStat([]byte(line))
	require.NoError(t, err)
	require.Equal(t, procStat{ppid: 4200, cpu: 175 * clockTick, children: 10 * clockTick}, st)
	_, err = parseProcStat([]byte("4242 (x) S 1 2"))
	require.Error(t, err)

	st, err = readProcStat(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, os.Getppid(), st.ppid)
	_, err = readProcStat(1 << 30)
	require.ErrorIs(t, err, syscall.ENOENT)
	if out, err := exec.Command("getconf", "CLK_TCK").Output(); err == nil {
		require.Equal(t, "100", strings.TrimSpace(string(out)), "clockTick assumes USER_HZ = 100")
	}
}

// TestPhaseCountsWritingCommits: a phase counts each transaction that
// wrote and committed, at once (no statistics lag), and not the read-only
// ones or the rolled-back ones; and the WAL they wrote. With PostgreSQL on
// this machine, findPostmaster finds its postmaster.
func TestPhaseCountsWritingCommits(t *testing.T) {
	url := pgtest.NewDB(t)
	ctx := t.Context()
	s := &system{dbURL: url}
	if os.Getenv(pgtest.EnvURL) == "" {
		pm, why := findPostmaster(ctx, url)
		require.NotZero(t, pm, why)
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pm))
		require.NoError(t, err)
		require.Equal(t, "postgres\n", string(comm))
		s.opts.postmaster = pm
	}
	defer s.close()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE TABLE t (v text)")
	require.NoError(t, err)

	p, err := s.startPhase(ctx)
	require.NoError(t, err)
	const writes = 50
	for i := range writes {
		_, err := conn.Exec(ctx, "INSERT INTO t VALUES ($1)", strings.Repeat("x", 1000+i))
		require.NoError(t, err)
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n))
	}
	for range 10 {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "INSERT INTO t VALUES ('rolled back')")
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
	}
	u, err := p.stop(ctx, writes)
	require.NoError(t, err)
	// Anything else on the server that wrote meanwhile (autovacuum's
	// analyze) counts too: a little slack above.
	require.GreaterOrEqual(t, u.commits, int64(writes))
	require.LessOrEqual(t, u.commits, int64(writes+5))
	require.Greater(t, u.walBytes, int64(writes*1000), "each insert wrote its 1,000 bytes")
	require.Less(t, u.walBytes, int64(writes*10_000))
	require.Contains(t, u.cpu, "bench")
	if s.opts.postmaster != 0 {
		require.Contains(t, u.cpu, "pg")
	}
}
