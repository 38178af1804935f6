// Package chaos is Fairway's fault-injection suite: it runs a real cluster
// of processes (PostgreSQL, NATS servers, fairway coordinators and
// executors), submits a workload, injects faults (SIGKILL, restarts,
// outages, dropped notifications, graceful shutdowns) and checks the
// accounting from PostgreSQL, the event stream and the executors' logs.
package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/fairwayhq/fairway/internal/devtest"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fairwayhq/fairway/internal/pgserver"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/jackc/pgx/v5"
)

// Timeouts of the cluster under test: short, so faults recover quickly.
const (
	Lease        = 3 * time.Second
	Heartbeat    = 500 * time.Millisecond
	WakeupPeriod = time.Second
	RetryDelay   = 500 * time.Millisecond
)

// Binaries are the programs the cluster runs.
type Binaries struct {
	Fairway    string
	NATSServer string
}

// Build compiles the fairway binary and the NATS server (from the module
// cache: nats-server is a dependency of Fairway) into dir. The fairway
// binary is built with the build tag fairwaychaos, which compiles in the
// coordinator's fault hooks (coordinator/chaoshook_fairwaychaos.go):
// production builds have none.
func Build(ctx context.Context, dir string) (Binaries, error) {
	b := Binaries{Fairway: filepath.Join(dir, "fairway"), NATSServer: filepath.Join(dir, "nats-server")}
	for _, target := range []struct{ out, pkg, tags string }{
		{b.Fairway, "github.com/fairwayhq/fairway/cmd/fairway", "fairwaychaos"},
		{b.NATSServer, "github.com/nats-io/nats-server/v2", ""},
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-tags="+target.tags, "-o", target.out, target.pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %w\n%s", target.pkg, err, out)
		}
	}
	return b, nil
}

// PG is a PostgreSQL server that a scenario can restart.
type PG struct {
	dir    string
	port   int
	server *pgserver.Server
}

// StartPG starts a throwaway cluster in dir (as the postgres user when
// running as root).
func StartPG(ctx context.Context, dir string) (*PG, error) {
	// Under root PostgreSQL runs as postgres, which must reach the directory.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	p := &PG{dir: filepath.Join(dir, "pg")}
	return p, p.Start(ctx)
}

// Start starts the server (again), on the same port as before.
func (p *PG) Start(ctx context.Context) error {
	s, err := pgserver.Start(ctx, pgserver.Options{Dir: p.dir, Port: p.port, Database: "postgres"})
	if err != nil {
		return err
	}
	p.server, p.port = s, s.Port()
	return nil
}

// Stop stops the server (fast mode: clients are disconnected).
func (p *PG) Stop() error { return p.server.Stop() }

// NewDatabase creates a database and returns its URL.
func (p *PG) NewDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, p.server.URLFor("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	id := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+id); err != nil {
		return "", err
	}
	return p.server.URLFor(name), nil
}

// Proc is one process of the cluster.
type Proc struct {
	Name string
	args []string
	env  []string
	log  string // file its stderr and stdout go to

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	exitErr error
	onLine  func(line []byte)
}

// Start starts the process; its output goes to its log file (appended, so
// a restart keeps the earlier lines) and, line by line, to onLine.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		_ = f.Close() // nothing was written to it
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	p.cmd, p.done, p.exitErr = cmd, make(chan struct{}), nil
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = f.Write(append(line, '\n'))
			if p.onLine != nil {
				p.onLine(line)
			}
		}
		_, _ = io.Copy(f, pr)
	}()
	done := p.done
	go func() {
		err := cmd.Wait()
		_ = pw.Close() // a pipe's Close never fails
		<-copied
		if cerr := f.Close(); cerr != nil {
			fmt.Fprintf(os.Stderr, "chaos: %s: closing its log %s: %v\n", p.Name, f.Name(), cerr)
		}
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	if p.Signal(syscall.SIGKILL) == nil {
		<-p.Done()
	}
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Wait waits up to timeout for the process to exit and returns its exit
// code (-1 if it was killed by a signal).
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.Done():
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s still running after %s", p.Name, timeout)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var exit *exec.ExitError
	if errors.As(p.exitErr, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, p.exitErr
}

// Pid is the process id of the running process, or 0.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running says whether the process runs.
func (p *Proc) Running() bool {
	select {
	case <-p.Done():
		return false
	default:
		return true
	}
}

// Cluster is the processes of one scenario.
type Cluster struct {
	bin   Binaries
	dir   string
	dbURL string
	// partitionURLs are the databases that hold partitions besides
	// dbURL's (ClusterOptions.PartitionURLs).
	partitionURLs []string

	NATS         []*Proc
	natsPorts    []int
	Coordinators []*Proc
	Executors    []*Proc
	Trace        *Trace

	// coordinatorNATSURL is what coordinators connect with; a scenario can
	// give them a user whose permissions drop work notifications.
	coordinatorNATSURL string
}

// ClusterOptions shape a cluster.
type ClusterOptions struct {
	NATSNodes    int // 1, or 3 for a JetStream cluster with replicated streams
	Coordinators int
	Executors    int
	PoolSize     int
	// DropNotify forbids the coordinators to publish work notifications, so
	// executors find work only through their wakeup period.
	DropNotify bool
	// NATSStoreDir, when set, is JetStream's store directory (of a single
	// node), e.g. on a size-limited tmpfs.
	NATSStoreDir string
	// Coordinator and Executor, when set, give coordinator or executor i
	// (from 0) its own options.
	Coordinator, Executor func(i int) ProcOptions
	// PartitionURLs are the databases that hold partitions besides the
	// cluster's own (the coordinators learn of them from their
	// environment): the accounting reads the jobs in all of them.
	PartitionURLs []string
}

// ProcOptions change how one coordinator or executor runs.
type ProcOptions struct {
	Env   []string // added to its environment
	Netns *Netns   // runs it inside this network namespace, bridged to NATS and PostgreSQL
}

// NewCluster starts NATS, coordinators and executors against dbURL.
func NewCluster(ctx context.Context, bin Binaries, dir, dbURL string, opts ClusterOptions) (_ *Cluster, err error) {
	c := &Cluster{bin: bin, dir: dir, dbURL: dbURL, partitionURLs: opts.PartitionURLs, Trace: newTrace()}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := c.startNATS(opts); err != nil {
		return nil, err
	}
	c.coordinatorNATSURL = c.NATSURL("")
	if opts.DropNotify {
		c.coordinatorNATSURL = c.NATSURL("coordinator:chaos@")
	}
	for i := range opts.Coordinators {
		var o ProcOptions
		if opts.Coordinator != nil {
			o = opts.Coordinator(i)
		}
		if _, err := c.AddCoordinatorWith(fmt.Sprintf("coordinator-%d", i+1), opts.NATSNodes, o); err != nil {
			return nil, err
		}
	}
	for i := range opts.Executors {
		var o ProcOptions
		if opts.Executor != nil {
			o = opts.Executor(i)
		}
		if _, err := c.AddExecutorWith(fmt.Sprintf("executor-%d", i+1), opts.PoolSize, 30*time.Second, o); err != nil {
			return nil, err
		}
	}
	return c, c.waitExecutorsRegistered(ctx, opts.Executors)
}

// NATSURL is the comma-separated list of the NATS nodes' URLs, with
// userinfo ("user:pass@") if given.
func (c *Cluster) NATSURL(userinfo string) string {
	urls := make([]string, len(c.natsPorts))
	for i, port := range c.natsPorts {
		urls[i] = fmt.Sprintf("nats://%s127.0.0.1:%d", userinfo, port)
	}
	return strings.Join(urls, ",")
}

func (c *Cluster) startNATS(opts ClusterOptions) error {
	n := max(opts.NATSNodes, 1)
	clusterPorts := make([]int, n)
	for i := range n {
		c.natsPorts = append(c.natsPorts, freePort())
		clusterPorts[i] = freePort()
	}
	for i := range n {
		storeDir := filepath.Join(c.dir, fmt.Sprintf("nats-%d", i+1))
		if opts.NATSStoreDir != "" {
			storeDir = opts.NATSStoreDir
		}
		conf := fmt.Sprintf("server_name: n%d\nlisten: 127.0.0.1:%d\nmax_payload: 8MB\njetstream { store_dir: %q }\n",
			i+1, c.natsPorts[i], storeDir)
		if n > 1 {
			var routes []string
			for j := range n {
				if j != i {
					routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", clusterPorts[j]))
				}
			}
			conf += fmt.Sprintf("cluster { name: chaos\n listen: 127.0.0.1:%d\n routes: [%s] }\n", clusterPorts[i], strings.Join(routes, ", "))
		}
		if opts.DropNotify {
			// The coordinators may publish anything but work notifications;
			// everyone else is unrestricted.
			conf += `authorization {
  users: [
    { user: coordinator, password: chaos, permissions: { publish: { deny: ["fairway.notify.>"] } } }
    { user: anyone, password: chaos }
  ]
}
no_auth_user: anyone
`
		}
		path := filepath.Join(c.dir, fmt.Sprintf("nats-%d.conf", i+1))
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return err
		}
		p := &Proc{Name: fmt.Sprintf("nats-%d", i+1), args: []string{c.bin.NATSServer, "-c", path}, log: filepath.Join(c.dir, fmt.Sprintf("nats-%d.log", i+1))}
		if err := p.Start(); err != nil {
			return err
		}
		c.NATS = append(c.NATS, p)
	}
	for i, port := range c.natsPorts {
		if err := waitHealthz(port, 30*time.Second); err != nil {
			return fmt.Errorf("nats-%d: %w (log: %s)", i+1, err, c.NATS[i].log)
		}
	}
	return nil
}

// RestartNATS starts NATS node i again after it was killed.
func (c *Cluster) RestartNATS(i int) error {
	if err := c.NATS[i].Start(); err != nil {
		return err
	}
	return waitHealthz(c.natsPorts[i], 30*time.Second)
}

// waitHealthz waits until a NATS server accepts connections: its client
// port answers with INFO.
func waitHealthz(port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			line, rerr := bufio.NewReader(conn).ReadString('\n')
			_ = conn.Close() // only read from
			if rerr == nil && strings.HasPrefix(line, "INFO") {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("NATS on port %d not ready within %s", port, timeout)
		}
		time.Sleep(50 * time.Millisecond) // polling a port that has no event to await
	}
}

func (c *Cluster) commonEnv() []string {
	return []string{
		"FAIRWAY_LOG_FORMAT=json",
		"FAIRWAY_EXECUTOR_HEARTBEAT=" + Heartbeat.String(),
	}
}

// AddCoordinator starts a coordinator process.
func (c *Cluster) AddCoordinator(name string, replicas int) (*Proc, error) {
	return c.AddCoordinatorWith(name, replicas, ProcOptions{})
}

// AddCoordinatorWith starts a coordinator process with its own options.
func (c *Cluster) AddCoordinatorWith(name string, replicas int, o ProcOptions) (*Proc, error) {
	p := &Proc{
		Name: name,
		args: []string{c.bin.Fairway, "coordinator", "--database-url", c.dbURL, "--nats-url", c.coordinatorNATSURL,
			"--lease", Lease.String(), "--retry-delay", RetryDelay.String(), "--retries", "3"},
		env: append(c.commonEnv(), o.Env...),
		log: filepath.Join(c.dir, name+".log"),
	}
	if replicas > 1 {
		p.env = append(p.env, "FAIRWAY_NATS_REPLICAS="+strconv.Itoa(replicas))
	}
	if err := c.inNetns(p, o.Netns, true); err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	c.Coordinators = append(c.Coordinators, p)
	return p, nil
}

// AddExecutor starts an executor process with the demo tasks.
func (c *Cluster) AddExecutor(appID string, poolSize int, drainTimeout time.Duration) (*Proc, error) {
	return c.AddExecutorWith(appID, poolSize, drainTimeout, ProcOptions{})
}

// AddExecutorWith starts an executor process with its own options.
func (c *Cluster) AddExecutorWith(appID string, poolSize int, drainTimeout time.Duration, o ProcOptions) (*Proc, error) {
	p := &Proc{Name: appID, log: filepath.Join(c.dir, appID+".log")}
	p.args = []string{c.bin.Fairway, "executor", "--nats-url", c.NATSURL(""), "--app-id", appID,
		"--pool-size", strconv.Itoa(poolSize), "--wakeup-period", WakeupPeriod.String(),
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", freePort()), "--http-token", executorHTTPToken,
		"--drain-timeout", drainTimeout.String(), "--log-level", "debug"}
	p.env = append(c.commonEnv(), o.Env...)
	if err := c.inNetns(p, o.Netns, false); err != nil {
		return nil, err
	}
	p.onLine = func(line []byte) { c.Trace.add(appID, line) }
	if err := p.Start(); err != nil {
		return nil, err
	}
	c.Executors = append(c.Executors, p)
	return p, nil
}

// inNetns makes p run inside ns (if not nil), with NATS and, for a
// coordinator, PostgreSQL reachable on the same 127.0.0.1 ports as
// outside, through the namespace's bridge.
func (c *Cluster) inNetns(p *Proc, ns *Netns, postgres bool) error {
	if ns == nil {
		return nil
	}
	ports := append([]int{}, c.natsPorts...)
	if postgres {
		pgPorts, err := urlPorts(c.dbURL)
		if err != nil {
			return err
		}
		ports = append(ports, pgPorts...)
	}
	for _, port := range ports {
		if err := ns.Bridge(port); err != nil {
			return err
		}
	}
	p.args = append([]string{"ip", "netns", "exec", ns.Name}, p.args...)
	return nil
}

// RestartExecutor starts an executor process again with the same app-id.
func (c *Cluster) RestartExecutor(p *Proc) error {
	c.Trace.restarted(p.Name)
	return p.Start()
}

// executorHTTPToken is the bearer token of the executors' HTTP endpoints.
const executorHTTPToken = "chaos-executor-http-token"

// HTTPAddr is an executor's HTTP endpoint.
func (p *Proc) HTTPAddr() string {
	for i, a := range p.args {
		if a == "--http-addr" {
			return p.args[i+1]
		}
	}
	return ""
}

// waitExecutorsRegistered waits until n executors are registered.
func (c *Cluster) waitExecutorsRegistered(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if got := c.Trace.registered(); got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d executors registered within a minute (logs in %s)", c.Trace.registered(), n, c.dir)
		case <-c.Trace.changed():
		}
	}
}

// Close kills every process that still runs.
func (c *Cluster) Close() {
	for _, p := range append(append(append([]*Proc{}, c.Executors...), c.Coordinators...), c.NATS...) {
		if p.Running() {
			p.Kill()
		}
	}
}

// DB opens the store on the scenario's database: the suite reads
// Fairway's tables only through it.
func (c *Cluster) DB(ctx context.Context) (*store.Store, error) {
	return store.Open(ctx, c.dbURL, store.Options{MaxConns: 4})
}

// DBs opens the cluster's database and those of its other partitions,
// for the accounting.
func (c *Cluster) DBs(ctx context.Context) (databases, error) {
	var dbs databases
	for _, u := range append([]string{c.dbURL}, c.partitionURLs...) {
		db, err := store.Open(ctx, u, store.Options{MaxConns: 4})
		if err != nil {
			dbs.Close()
			return nil, err
		}
		dbs = append(dbs, db)
	}
	return dbs, nil
}

// freePort returns a port on 127.0.0.1 that nothing listens on now and
// that this process has not handed out before (devtest.Port).
func freePort() int {
	port, err := devtest.Port()
	if err != nil {
		panic(err)
	}
	return port
}

// logLine is the part of a JSON log line the trace reads.
type logLine struct {
	Time    time.Time `json:"time"`
	Msg     string    `json:"msg"`
	JobID   string    `json:"job_id"`
	Attempt int       `json:"attempt"`
	Task    string    `json:"task"`
	Outcome string    `json:"outcome"`
}

func parseLogLine(line []byte) (logLine, bool) {
	var l logLine
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &l) != nil {
		return l, false
	}
	return l, true
}
