package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// clockTick is the unit of the CPU times in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 per second for user space on every
// architecture (sysconf(_SC_CLK_TCK)); a figure has that resolution.
const clockTick = 10 * time.Millisecond

// cpuSampler measures the CPU time (user + system) that a set of
// processes spends between Start and Stop. Each target is read at both
// ends; the difference is its figure.
type cpuSampler struct {
	targets []cpuTarget
	start   []time.Duration
}

// cpuTarget is one figure of a cpuSampler: read returns the CPU time its
// processes have used so far.
type cpuTarget struct {
	name string
	read func() (time.Duration, error)
}

// add measures a figure named name, read by read.
func (c *cpuSampler) add(name string, read func() (time.Duration, error)) {
	c.targets = append(c.targets, cpuTarget{name, read})
}

// Start reads every target's CPU time so far.
func (c *cpuSampler) Start() error {
	c.start = make([]time.Duration, len(c.targets))
	for i, t := range c.targets {
		v, err := t.read()
		if err != nil {
			return fmt.Errorf("reading the CPU time of %s: %w", t.name, err)
		}
		c.start[i] = v
	}
	return nil
}

// Stop returns the CPU time each target spent since Start, by name.
func (c *cpuSampler) Stop() (map[string]time.Duration, error) {
	if c.start == nil {
		return nil, fmt.Errorf("cpuSampler: Stop without Start")
	}
	out := make(map[string]time.Duration, len(c.targets))
	for i, t := range c.targets {
		v, err := t.read()
		if err != nil {
			return nil, fmt.Errorf("reading the CPU time of %s: %w", t.name, err)
		}
		out[t.name] = v - c.start[i]
	}
	return out, nil
}

// procStat is what the CPU figures need of /proc/<pid>/stat.
type procStat struct {
	ppid int
	// cpu is utime+stime, the process's own (all its threads');
	// children is cutime+cstime, that of its children it has reaped.
	cpu, children time.Duration
}

// readProcStat reads /proc/<pid>/stat.
func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(data)
}

// parseProcStat parses the text of /proc/<pid>/stat (proc(5)): the command
// name, in parentheses, may hold spaces and parentheses, so the fields
// are counted from the last ')'.
func parseProcStat(data []byte) (procStat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("unexpected /proc stat %q", data)
	}
	// Fields from 3 (state) on: ppid is field 4, utime 14, stime 15,
	// cutime 16, cstime 17.
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("unexpected /proc stat %q", data)
	}
	var n [5]int64
	for j, field := range []int{1, 11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[field], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("unexpected /proc stat %q: %w", data, err)
		}
		n[j] = v
	}
	return procStat{
		ppid:     int(n[0]),
		cpu:      time.Duration(n[1]+n[2]) * clockTick,
		children: time.Duration(n[3]+n[4]) * clockTick,
	}, nil
}

// processCPU reads the CPU time of process pid: its own and its reaped
// children's (the coordinator and the NATS server start none).
func processCPU(pid int) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		st, err := readProcStat(pid)
		if err != nil {
			return 0, err
		}
		return st.cpu + st.children, nil
	}
}

// processTreeCPU reads the CPU time of process pid (the postmaster) and of
// its children: its own, that of its live children (each with what they
// reaped), and that of the children it reaped (cutime+cstime). A child
// that exits between two readings moves from the live sum into the
// parent's reaped one, so the difference still counts it once; only a
// child reaped between the listing and the parent's reading can be lost,
// which is why the parent is read last: a child reaped after its own
// reading is then counted twice rather than not at all, and backends
// rarely exit while a benchmark phase runs (the pools keep them).
func processTreeCPU(pid int) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		live, err := childrenCPU(pid)
		if err != nil {
			return 0, err
		}
		st, err := readProcStat(pid)
		if err != nil {
			return 0, err
		}
		return live + st.cpu + st.children, nil
	}
}

// childrenCPU sums the CPU time (own and reaped) of the live children of
// process ppid, found by scanning /proc.
func childrenCPU(ppid int) (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == ppid {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		if st.ppid == ppid {
			sum += st.cpu + st.children
		}
	}
	return sum, nil
}

// localHosts are the PostgreSQL hosts that are this machine.
var localHosts = []string{"localhost", "127.0.0.1", "::1"}

// findPostmaster returns the pid of the PostgreSQL server at url when it
// runs on this machine (a unix socket or a loopback host): the parent of
// the backend serving a connection (pg_backend_pid), once /proc confirms
// that both are PostgreSQL processes and the backend serves this
// connection's database (which rules out a server in a container, whose
// pids are another namespace's). Otherwise 0 and why not.
func findPostmaster(ctx context.Context, url string) (int, string) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return 0, err.Error()
	}
	if !strings.HasPrefix(cfg.Host, "/") && !slices.Contains(localHosts, cfg.Host) {
		return 0, fmt.Sprintf("PostgreSQL is not on this machine (host %s)", cfg.Host)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, err.Error()
	}
	defer conn.Close(ctx)
	var backend int
	var db string
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid(), current_database()").Scan(&backend, &db); err != nil {
		return 0, err.Error()
	}
	notFound := fmt.Sprintf("the backend's pid %d is not a PostgreSQL process serving database %s in this machine's /proc (in a container? update_process_title off?)", backend, db)
	title, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", backend))
	if err != nil || !bytes.Contains(title, []byte("postgres")) || !bytes.Contains(title, []byte(db)) {
		return 0, notFound
	}
	st, err := readProcStat(backend)
	if err != nil {
		return 0, notFound
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", st.ppid))
	if err != nil || !strings.HasPrefix(string(comm), "postgres") {
		return 0, notFound
	}
	return st.ppid, ""
}

// PostgresCPU returns a reader of the CPU time of the PostgreSQL server
// that backend pid (pg_backend_pid()) belongs to, on this machine: its
// postmaster and every backend. For benchmarks outside this package (the
// journal's).
func PostgresCPU(backendPID int) (func() (time.Duration, error), error) {
	st, err := readProcStat(backendPID)
	if err != nil {
		return nil, fmt.Errorf("reading PostgreSQL backend %d: %w", backendPID, err)
	}
	return processTreeCPU(st.ppid), nil
}

// ThisProcessCPU reads the CPU time of this process.
func ThisProcessCPU() (time.Duration, error) { return processCPU(os.Getpid())() }
