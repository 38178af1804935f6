// Package bench measures Fairway as users see it: throughput, latency,
// fairness and scale, against a real PostgreSQL and NATS, with executors in
// this process and the coordinator and the NATS server each in a process
// of its own (so that their memory and CPU time can be read) or in this
// one; and, for every scenario, the CPU time, WAL and commits per job. It
// backs `fairway bench`.
package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsserver"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storeaccess"
	fstore "github.com/fairwayhq/fairway/store"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Scenarios lists the scenarios in the order "all" runs them.
var Scenarios = []string{"drain", "latency", "steady", "fairness", "short-jobs", "scale", "history", "features", "ingest", "shares", "failover", "partition-down"}

// Options configures a benchmark run.
type Options struct {
	// ServerURL is a PostgreSQL URL whose user may create databases; each
	// scenario runs in a fresh database of its own, dropped afterwards.
	ServerURL string
	// NATSURL is an external NATS server; empty starts an embedded one.
	NATSURL string
	// NATSOptions authenticate and secure the connections to NATSURL
	// (natsconn.Options).
	NATSOptions []nats.Option
	// Jobs is the drain backlog (default 100,000).
	Jobs int
	// Slots is the executors' pool size (default 100 for throughput
	// scenarios; the fairness scenario uses 10, short-jobs ShortJobSlots).
	Slots int
	// ShortJobs is how many jobs of 5 ms the short-jobs scenario runs
	// (default 1,000), on ShortJobSlots slots (default: Slots when it is
	// set, else 11).
	ShortJobs     int
	ShortJobSlots int
	// Rate and Duration drive the steady scenario (default 5,000/s, 10 s).
	Rate     int
	Duration time.Duration
	// ScaleSizes are the queue lengths of the scale scenario (default
	// 10,000, 100,000 and 1,000,000 over 10,000 groups).
	ScaleSizes []int
	// History is how many finished jobs the history scenario keeps
	// (default 1,000,000).
	History int
	// Groups is how many groups submit the ingest scenario's burst
	// (default 1); Single publishes each of its submissions as a message
	// of its own (else 100 to a message, as SubmitMany does).
	Groups int
	Single bool
	// TenantStreams gives each group of the ingest scenario a stream of
	// its own, as tenants have in operator mode.
	TenantStreams bool
	// NoisyTenants is how many tenants flood the second case of the
	// fairness scenario (default 10; negative skips the case).
	NoisyTenants int
	// Fairness is the coordinator's scheduler.fairness in every scenario
	// but shares, which runs each ("": the default, jobs).
	Fairness string
	JSON     bool
	Out      io.Writer
	// Logger receives the benchmark's progress; ComponentLogger the logs
	// of the coordinator and executors it runs (default: Logger).
	Logger          *slog.Logger
	ComponentLogger *slog.Logger
	// CoordinatorCommand, when set, runs the coordinator as this command
	// (e.g. ["/usr/bin/fairway", "coordinator"]), given --nats-url and the
	// database URL (in FAIRWAY_DATABASE_URL), in a process of its own: its peak resident set is the
	// figure coordinator_rss_mib. Empty: the coordinator runs in this
	// process, and bench_process_rss_mib is that of the whole process.
	CoordinatorCommand []string
	// CoordinatorEnv is added to the coordinator process's environment
	// (the NATS credentials of NATSOptions, as FAIRWAY_NATS_* variables).
	CoordinatorEnv []string
	// NATSCommand, when set with CoordinatorCommand and without NATSURL,
	// runs the NATS server as this command (e.g. ["/usr/bin/fairway",
	// "bench-nats"]), given --store-dir, in a process of its own: it prints
	// its client URL on a line of its stdout and exits when its stdin
	// closes. Its CPU time is then the figure cpu_us_per_job_nats. Empty:
	// the NATS server runs in this process.
	NATSCommand []string
	// ExecutorCommand, when set, runs the executor of the drain and
	// short-jobs scenarios as this command: another language's
	// conformance program (clients/conformance/README.md; fairway bench
	// --executor python|node), given --nats-url, --app-id, --slots and
	// --tasks conf-sleep, in a process of its own whose CPU time is the
	// figure cpu_us_per_job_executor. Empty: the Go executor, in this
	// process. ExecutorEnv is added to its environment.
	ExecutorCommand []string
	ExecutorEnv     []string
	// Partitions is the cluster's partition count (default 1: the
	// cluster as it runs today). PartitionServers are more PostgreSQL
	// servers (URLs whose user may create databases): partition p lives
	// on server p mod (1 + len(PartitionServers)), server 0 being
	// ServerURL's, each in a fresh database of the scenario's. Both need
	// CoordinatorCommand; the CPU figure of server k is
	// cpu_us_per_job_pg_<k>.
	Partitions       int
	PartitionServers []string
	// DownCluster is the server the partition-down scenario takes down:
	// 1 is ServerURL's (the cluster's home database: the executors'
	// registry, the limits, the periodic tasks), k that of
	// PartitionServers[k-2]; 0, the last.
	DownCluster int

	// postmaster is the pid of the PostgreSQL server when it runs on this
	// machine (found by Run), else 0.
	postmaster int
	// partPostmasters are those of PartitionServers (0: not on this
	// machine).
	partPostmasters []int
}

func (o Options) withDefaults() Options {
	if o.Jobs == 0 {
		o.Jobs = 100_000
	}
	if o.NoisyTenants == 0 {
		o.NoisyTenants = 10
	}
	if o.ShortJobs == 0 {
		o.ShortJobs = 1000
	}
	if o.ShortJobSlots == 0 {
		o.ShortJobSlots = o.Slots
		if o.ShortJobSlots == 0 {
			o.ShortJobSlots = 11
		}
	}
	if o.Slots == 0 {
		o.Slots = 100
	}
	if o.Rate == 0 {
		o.Rate = 5000
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.History == 0 {
		o.History = 1_000_000
	}
	if len(o.ScaleSizes) == 0 {
		o.ScaleSizes = []int{10_000, 100_000, 1_000_000}
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ComponentLogger == nil {
		o.ComponentLogger = o.Logger
	}
	return o
}

// Result is one scenario's figures, printed as one line.
type Result struct {
	Scenario string
	Jobs     int
	Figures  []Figure
}

// Figure is one named value of a result.
type Figure struct {
	Key   string
	Value any
}

func (r *Result) add(key string, value any) { r.Figures = append(r.Figures, Figure{key, value}) }

// MarshalJSON writes the result as one flat object: scenario, jobs, figures.
func (r Result) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	fmt.Fprintf(&b, `{"scenario":%q,"jobs":%d`, r.Scenario, r.Jobs)
	for _, f := range r.Figures {
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, `,%q:%s`, f.Key, v)
	}
	b.WriteString("}")
	return []byte(b.String()), nil
}

func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-9s jobs=%d", r.Scenario, r.Jobs)
	for _, f := range r.Figures {
		switch v := f.Value.(type) {
		case float64:
			fmt.Fprintf(&b, " %s=%.1f", f.Key, v)
		default:
			fmt.Fprintf(&b, " %s=%v", f.Key, v)
		}
	}
	return b.String()
}

// Run runs the named scenario ("all" for every one) and prints one line per
// scenario (JSON with opts.JSON).
func Run(ctx context.Context, scenario string, opts Options) error {
	opts = opts.withDefaults()
	names := []string{scenario}
	if scenario == "all" {
		names = opts.allScenarios()
	} else if !slices.Contains(Scenarios, scenario) {
		return fmt.Errorf("unknown scenario %q (known: %s, all)", scenario, strings.Join(Scenarios, ", "))
	}
	if err := opts.checkPartitions(names); err != nil {
		return err
	}
	settings, err := serverSettings(ctx, opts.ServerURL)
	if err != nil {
		return err
	}
	var pgCPU string
	opts.postmaster, pgCPU = findPostmaster(ctx, opts.ServerURL)
	if opts.postmaster != 0 {
		pgCPU = fmt.Sprintf("cpu_us_per_job_pg: postmaster %d and its children", opts.postmaster)
	} else {
		pgCPU = "no cpu_us_per_job_pg: " + pgCPU
	}
	if len(opts.PartitionServers) > 0 {
		pgCPU += "; " + opts.findPartitionPostmasters(ctx)
	}
	if !opts.JSON {
		if _, err := fmt.Fprintf(opts.Out, "# PostgreSQL %s\n# %s; %s\n", settings, pgCPU, cpuProcesses(opts)); err != nil {
			return err
		}
	}
	for _, name := range names {
		opts.Logger.Info("bench: running scenario", "scenario", name)
		res, err := runScenario(ctx, name, opts)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", name, err)
		}
		if opts.Partitions > 1 {
			res.add("partitions", opts.Partitions)
			res.add("pg_servers", 1+len(opts.PartitionServers))
		}
		if opts.JSON {
			res.add("pg_settings", settings)
			data, err := json.Marshal(res)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintln(opts.Out, string(data)); err != nil {
				return err
			}
		} else if _, err := fmt.Fprintln(opts.Out, res); err != nil {
			return err
		}
	}
	return nil
}

func runScenario(ctx context.Context, name string, opts Options) (*Result, error) {
	if opts.external() && name != "drain" && name != "short-jobs" {
		return nil, fmt.Errorf("scenario %s runs the Go executor only: an executor in another language (--executor) runs the drain and short-jobs scenarios", name)
	}
	switch name {
	case "drain":
		return drain(ctx, opts)
	case "latency":
		return latency(ctx, opts)
	case "steady":
		return steady(ctx, opts)
	case "fairness":
		return fairness(ctx, opts)
	case "short-jobs":
		return shortJobs(ctx, opts)
	case "history":
		return history(ctx, opts)
	case "features":
		return features(ctx, opts)
	case "ingest":
		return ingestScenario(ctx, opts)
	case "shares":
		return sharesScenario(ctx, opts)
	case "failover":
		return failover(ctx, opts)
	case "partition-down":
		return partitionDown(ctx, opts)
	default:
		return scale(ctx, opts)
	}
}

// serverSettings reads the durability settings the figures depend on.
func serverSettings(ctx context.Context, url string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	var parts []string
	for _, name := range []string{"server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "shared_buffers"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return "", err
		}
		if name == "server_version" {
			v, _, _ = strings.Cut(v, " ")
		}
		parts = append(parts, name+"="+v)
	}
	return strings.Join(parts, " "), nil
}

// system is one scenario's Fairway: a fresh database, NATS, a coordinator
// (in its own process or this one) and executors.
type system struct {
	opts  Options
	store *store.Store
	ns    *server.Server
	nc    *nats.Conn
	coord *coordinator.Coordinator
	// coordPid is the coordinator's process, when it runs in its own;
	// coordEnv is added to its environment. natsPid is the NATS server's
	// process, when it runs in its own.
	coordPid int
	natsPid  int
	execPid  int // the external executor's (ExecutorCommand)
	// natsURL is where the coordinators connect; killed is a coordinator
	// process the scenario killed (failover), which its cleanup leaves be.
	natsURL  string
	killed   int
	coordEnv []string
	dbURL    string
	// partDBs are the scenario's databases on Options.PartitionServers.
	partDBs []string
	execs   []*executor.Executor
	client  *events.Client
	cleanup []func()
	connect func(name string) (*nats.Conn, error)

	started  sync.Map     // job id -> time the handler started
	finished chan arrival // success events, stamped when they arrive
	// ran counts handler calls; ranEnough is closed when it reaches
	// ranTarget (when that is set).
	ran       atomic.Int64
	ranTarget atomic.Int64
	ranEnough chan struct{}
}

type systemConfig struct {
	slots     int
	executors int
	handler   executor.Handler
	// noExecutors leaves the executors to be started later (scale).
	noExecutors bool
	// history is how many finished jobs (success, ended two hours ago) the
	// database holds before the coordinator starts; with prune, the
	// coordinator's retention of successes is one hour, so it prunes them
	// while the scenario runs.
	history int
	prune   bool
	// fairness is the coordinator's scheduler.fairness ("": the default).
	fairness string
}

func newSystem(ctx context.Context, opts Options, cfg systemConfig) (_ *system, err error) {
	// Not the named result: a failure returns nil, and what was started
	// must still be stopped (a coordinator process left running, else).
	s := &system{opts: opts, finished: make(chan arrival, 1<<20), ranEnough: make(chan struct{})}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	dbURL, drop, err := createDatabase(ctx, opts.ServerURL)
	if err != nil {
		return nil, err
	}
	s.cleanup = append(s.cleanup, drop)
	s.dbURL = dbURL
	if err := s.createPartitionDatabases(ctx); err != nil {
		return nil, err
	}
	s.store, err = store.Open(ctx, dbURL, store.Options{MaxConns: 20})
	if err != nil {
		return nil, err
	}
	s.cleanup = append(s.cleanup, s.store.Close)
	if _, err := s.store.Migrate(ctx); err != nil {
		return nil, err
	}
	if cfg.history > 0 {
		if err := fillHistory(ctx, s.store, cfg.history, opts.Logger); err != nil {
			return nil, err
		}
	}
	retention := coordinator.Retention{}
	if cfg.prune {
		retention.Success = time.Hour
		s.coordEnv = append(s.coordEnv, "FAIRWAY_COORDINATOR_RETENTION_SUCCESS=1h")
	}
	cfg.fairness = cmp.Or(cfg.fairness, opts.Fairness)
	if cfg.fairness != "" {
		s.coordEnv = append(s.coordEnv, "FAIRWAY_SCHEDULER_FAIRNESS="+cfg.fairness)
	}
	connect := func(name string) (*nats.Conn, error) {
		return nats.Connect(opts.NATSURL, append([]nats.Option{nats.Name(name)}, opts.NATSOptions...)...)
	}
	natsURL := opts.NATSURL
	if opts.NATSURL == "" {
		dir, err := os.MkdirTemp("", "fairway-bench-nats-")
		if err != nil {
			return nil, err
		}
		s.cleanup = append(s.cleanup, func() {
			if err := os.RemoveAll(dir); err != nil {
				opts.Logger.Warn("bench: cannot remove the NATS store", "dir", dir, "error", err)
			}
		})
		if len(opts.CoordinatorCommand) > 0 && len(opts.NATSCommand) > 0 {
			if natsURL, err = s.startNATSProcess(dir); err != nil {
				return nil, err
			}
			connect = func(name string) (*nats.Conn, error) { return nats.Connect(natsURL, nats.Name(name)) }
		} else {
			s.ns, err = natsserver.Start(natsserver.Options{StoreDir: dir, Port: -1})
			if err != nil {
				return nil, err
			}
			s.cleanup = append(s.cleanup, func() { s.ns.Shutdown(); s.ns.WaitForShutdown() })
			natsURL = s.ns.ClientURL()
			connect = func(name string) (*nats.Conn, error) { return natsserver.Connect(s.ns, name) }
		}
	}
	s.connect, s.natsURL = connect, natsURL
	if s.nc, err = connect("fairway-bench"); err != nil {
		return nil, err
	}
	s.cleanup = append(s.cleanup, s.nc.Close)
	if s.client, err = events.NewClient(s.nc, events.ClientOptions{}); err != nil {
		return nil, err
	}
	if len(opts.CoordinatorCommand) > 0 {
		if err := s.startCoordinatorProcess(ctx); err != nil {
			return nil, err
		}
	} else {
		if s.coord, err = coordinator.New(storeaccess.Public(s.store).(*fstore.Store), s.nc, coordinator.Config{Logger: opts.ComponentLogger, QuotaJobs: -1, QuotaSubmitRate: -1, Retention: retention,
			Fairness: cfg.fairness}); err != nil {
			return nil, err
		}
		if err := s.coord.Start(ctx); err != nil {
			return nil, err
		}
		s.cleanup = append(s.cleanup, s.coord.Stop)
	}
	sub, err := s.client.Subscribe(ctx, events.Filter{State: fairway.StateSuccess}, func(ev events.Event) {
		s.finished <- arrival{ev, time.Now()}
	})
	if err != nil {
		return nil, err
	}
	s.cleanup = append(s.cleanup, sub.Stop)
	if !cfg.noExecutors {
		if err := s.startExecutors(ctx, cfg); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// startCoordinatorProcess runs the coordinator command against the
// scenario's database, without quotas (the benchmark is one tenant at full
// speed), its logs at warn on stderr, and waits until it answers.
func (s *system) startCoordinatorProcess(ctx context.Context) error {
	c := s.opts.CoordinatorCommand
	cmd := exec.Command(c[0], append(slices.Clone(c[1:]), "--nats-url", s.natsURL)...) //nolint:gosec // G204: the caller's own command (fairway bench: its own binary)
	// The database URL may hold a password: in the environment, not on a
	// command line that other users can read.
	cmd.Env = append(os.Environ(), "FAIRWAY_DATABASE_URL="+s.dbURL, "FAIRWAY_COORDINATOR_QUOTA_JOBS=0", "FAIRWAY_COORDINATOR_QUOTA_SUBMIT_RATE=0",
		"FAIRWAY_COORDINATOR_QUOTA_API_RATE=0", "FAIRWAY_LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, s.opts.CoordinatorEnv...)
	cmd.Env = append(cmd.Env, s.coordEnv...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the coordinator (%s): %w", strings.Join(c, " "), err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s.coordPid = cmd.Process.Pid
	s.cleanup = append(s.cleanup, func() {
		if s.killed == cmd.Process.Pid {
			if err := <-exited; err != nil {
				s.opts.Logger.Debug("bench: the coordinator killed on purpose exited", "pid", cmd.Process.Pid, "error", err)
			}
			return
		}
		s.stopProcess("the coordinator", cmd, exited, func() error { return cmd.Process.Signal(syscall.SIGTERM) })
	})
	// It answers once it has migrated and made its streams.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := s.client.Executors(ctx)
		if err == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the coordinator (%s) exited at start: %v", strings.Join(c, " "), err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the coordinator (%s) did not answer within a minute: %w", strings.Join(c, " "), err)
		}
	}
}

// stopProcess asks a child to stop, waits up to 30 s for it to exit, else
// kills it, and says so when it did not stop cleanly.
func (s *system) stopProcess(name string, cmd *exec.Cmd, exited <-chan error, ask func() error) {
	if err := ask(); err != nil {
		s.opts.Logger.Warn("bench: cannot ask "+name+" to stop: killing it", "pid", cmd.Process.Pid, "error", err)
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		s.opts.Logger.Warn("bench: "+name+" did not stop within 30 s: killing it", "pid", cmd.Process.Pid)
		_ = cmd.Process.Kill() // fails only if it has just exited
		err = <-exited
	}
	if err != nil {
		s.opts.Logger.Warn("bench: "+name+" did not stop cleanly", "pid", cmd.Process.Pid, "error", err)
	}
}

// startNATSProcess runs the NATS command with its store in dir, and
// returns the client URL it prints once it accepts connections. Its stdin
// is a pipe that only this process holds: closing it (or this process
// ending) stops the server.
func (s *system) startNATSProcess(dir string) (string, error) {
	c := s.opts.NATSCommand
	cmd := exec.Command(c[0], append(slices.Clone(c[1:]), "--store-dir", dir)...) //nolint:gosec // G204: the caller's own command (fairway bench: its own binary)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting the NATS server (%s): %w", strings.Join(c, " "), err)
	}
	exited := make(chan error, 1)
	urls := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		urls <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	s.natsPid = cmd.Process.Pid
	s.cleanup = append(s.cleanup, func() { s.stopProcess("the NATS server", cmd, exited, stdin.Close) })
	select {
	case url := <-urls:
		if !strings.HasPrefix(url, "nats://") {
			return "", fmt.Errorf("the NATS server (%s) did not start (printed %q; its errors are above)", strings.Join(c, " "), url)
		}
		return url, nil
	case <-time.After(time.Minute):
		return "", fmt.Errorf("the NATS server (%s) printed no URL within a minute", strings.Join(c, " "))
	}
}

// cpuProcesses says which processes the CPU figures other than
// PostgreSQL's measure.
func cpuProcesses(opts Options) string {
	var own []string
	if len(opts.CoordinatorCommand) > 0 {
		own = append(own, "cpu_us_per_job_coordinator: the coordinator process")
		if opts.NATSURL == "" && len(opts.NATSCommand) > 0 {
			own = append(own, "cpu_us_per_job_nats: the NATS server process")
		}
	}
	in := "executors, clients"
	if opts.external() {
		own = append(own, "cpu_us_per_job_executor: the executor process ("+filepath.Base(opts.ExecutorCommand[len(opts.ExecutorCommand)-1])+")")
		in = "clients"
	}
	if len(opts.CoordinatorCommand) == 0 {
		in += ", the coordinator"
	}
	if opts.NATSURL == "" && (len(opts.CoordinatorCommand) == 0 || len(opts.NATSCommand) == 0) {
		in += ", the NATS server"
	}
	own = append(own, "cpu_us_per_job_bench: this process ("+in+")")
	if opts.NATSURL != "" {
		own = append(own, "the NATS server at --nats-url is not measured")
	}
	return strings.Join(own, "; ")
}

// fillHistory stores n finished jobs (store.FillHistory) in batches of
// 100,000, as years of use would leave them.
func fillHistory(ctx context.Context, st *store.Store, n int, log *slog.Logger) error {
	for done := 0; done < n; done += 100_000 {
		log.Info("bench: storing finished jobs", "stored", done, "total", n)
		if err := st.FillHistory(ctx, int64(done+1), int64(min(done+100_000, n))); err != nil {
			return err
		}
	}
	return st.Analyze(ctx)
}

// storeWaiting stores subs, waiting, as fast as the journal takes them:
// through store.InsertTx (one row of the log for the batch, folded by the
// leader).
func (s *system) storeWaiting(ctx context.Context, subs []fairway.Submission) error {
	tx, err := s.store.Pool().Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := store.InsertTx(ctx, tx, store.TxOptions{Retries: 5}, subs...); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// rss is the memory figure: the coordinator process's peak resident set
// (coordinator_rss_mib), or this whole process's when the coordinator runs
// in it (bench_process_rss_mib).
func (s *system) rss() (key string, mib float64) {
	return s.rssKey(), peakRSSMiB(s.coordPid)
}

// rssNow is rss's process's resident set now, under rss's key with
// suffix.
func (s *system) rssNow(suffix string) (key string, mib float64) {
	return s.rssKey() + suffix, rssMiB(s.coordPid)
}

// rssKey names rss's figure: the coordinator's, or this process's when
// the coordinator runs in it.
func (s *system) rssKey() string {
	if s.coordPid != 0 {
		return "coordinator_rss_mib"
	}
	return "bench_process_rss_mib"
}

func (s *system) startExecutors(ctx context.Context, cfg systemConfig) error {
	if s.opts.external() {
		return s.startExecutorProcess(ctx, cfg)
	}
	handler := cfg.handler
	for i := range max(cfg.executors, 1) {
		nc, err := s.connect(fmt.Sprintf("fairway-bench-executor-%d", i))
		if err != nil {
			return err
		}
		s.cleanup = append(s.cleanup, nc.Close)
		ex, err := executor.New(nc, executor.Config{AppID: fmt.Sprintf("bench-%d", i), PoolSize: cfg.slots, WakeupPeriod: time.Second, Logger: s.opts.ComponentLogger})
		if err != nil {
			return err
		}
		ex.Handle("work", func(ctx context.Context, job *executor.Job) error {
			s.started.Store(job.ID, time.Now())
			if n := s.ran.Add(1); n == s.ranTarget.Load() {
				close(s.ranEnough)
			}
			if handler != nil {
				return handler(ctx, job)
			}
			return nil
		})
		if err := ex.Start(ctx); err != nil {
			return err
		}
		s.cleanup = append(s.cleanup, ex.Stop)
		s.execs = append(s.execs, ex)
	}
	return nil
}

func (s *system) close() {
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		s.cleanup[i]()
	}
	s.cleanup = nil
}

// waitFinished waits until n jobs reached a final state, returning their
// events in arrival order with the time each arrived.
func (s *system) waitFinished(ctx context.Context, n int, timeout time.Duration) ([]arrival, error) {
	out := make([]arrival, 0, n)
	deadline := time.After(timeout)
	progress := time.NewTicker(progressEvery)
	defer progress.Stop()
	for len(out) < n {
		select {
		case a := <-s.finished:
			out = append(out, a)
		case <-progress.C:
			s.opts.Logger.Info("bench: waiting for jobs to succeed", "succeeded", len(out), "total", n)
		case <-deadline:
			return out, fmt.Errorf("only %d of %d jobs finished within %s", len(out), n, timeout)
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
	return out, nil
}

// progressEvery is how often a long wait logs how far it got.
const progressEvery = 5 * time.Second

type arrival struct {
	ev events.Event
	at time.Time
}

func submissions(n int, group func(i int) string) []fairway.Submission {
	subs := make([]fairway.Submission, n)
	for i := range subs {
		subs[i] = fairway.Submission{ID: fairway.NewID(), Group: group(i), Task: "work"}
	}
	return subs
}

// waitingArgs are the arguments of the jobs the memory scenarios (scale,
// failover) keep waiting: 200 bytes, as condition 6 of issue 31 counts a
// waiting job (a leader holds 1,000,000 of them in at most 400 MiB).
var waitingArgs = json.RawMessage(`{"payload":"` + strings.Repeat("x", 200-len(`{"payload":""}`)) + `"}`)

// withArgs gives subs waitingArgs.
func withArgs(subs []fairway.Submission) []fairway.Submission {
	for i := range subs {
		subs[i].Args = waitingArgs
	}
	return subs
}

// createDatabase creates a fresh database on the server and returns its URL
// and a function that drops it.
func createDatabase(ctx context.Context, serverURL string) (string, func(), error) {
	cfg, err := pgx.ParseConfig(serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("database url: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("fairway_bench_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("creating a scratch database (the user needs CREATEDB): %w", err)
	}
	drop := func() {
		c, err := pgx.ConnectConfig(context.Background(), cfg)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return replaceDatabase(serverURL, name), drop, nil
}

// replaceDatabase swaps the database name in a postgres:// URL.
func replaceDatabase(url, db string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url + " dbname=" + db
	}
	hostPart, query, _ := strings.Cut(rest, "?")
	host, _, _ := strings.Cut(hostPart, "/")
	out := scheme + "://" + host + "/" + db
	if query != "" {
		out += "?" + query
	}
	return out
}

// percentile returns the p-th percentile (0..100) of ds in milliseconds.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	i := int(float64(len(sorted)-1) * p / 100)
	return ms(sorted[i])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// peakRSSMiB reads the peak resident set size of process pid (0: this one).
func peakRSSMiB(pid int) float64 { return statusMiB(pid, "VmHWM:") }

// rssMiB reads the resident set size of process pid (0: this one) now.
func rssMiB(pid int) float64 { return statusMiB(pid, "VmRSS:") }

// statusMiB reads a size in kB from a line of /proc/<pid>/status.
func statusMiB(pid int, field string) float64 {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb); err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}
