package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/fairwayhq/fairway/internal/bench"
	"github.com/fairwayhq/fairway/internal/config"
	"github.com/fairwayhq/fairway/internal/logging"
	"github.com/fairwayhq/fairway/internal/natsconn"
	"github.com/fairwayhq/fairway/internal/natsserver"
	"github.com/fairwayhq/fairway/internal/pgserver"
	"github.com/spf13/cobra"
)

// natsEnv passes the NATS credentials and TLS files of the configuration
// to a child process, as environment variables (not on its command line,
// where other users could read a password).
func natsEnv(n config.NATSConfig) []string {
	var env []string
	for name, v := range map[string]string{"CREDS": n.Creds, "NKEY": n.NKey, "USER": n.User, "PASSWORD": n.Password,
		"TOKEN": n.Token, "TLS_CA": n.TLSCA, "TLS_CERT": n.TLSCert, "TLS_KEY": n.TLSKey, "PREFIX": n.Prefix} {
		if v != "" {
			env = append(env, "FAIRWAY_NATS_"+name+"="+v)
		}
	}
	return env
}

func newBenchCmd(e *env) *cobra.Command {
	var opts bench.Options
	var scenario, cpuProfile, memProfile string
	var inProcess bool
	var executorKind, clientsDir string
	var pgClusters int
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput, latency, fairness and scale",
		Long: `Run a coordinator and executors against PostgreSQL and NATS, with no-op or
sleeping tasks, and print one line per scenario (one JSON object with
--json). Each scenario uses a fresh database of its own, dropped after. The
coordinator runs as 'fairway coordinator' in a process of its own, so that
coordinator_rss_mib is its own peak memory, and so does the embedded NATS
server (without --nats-url); --in-process runs both in this process (e.g.
to include them in --cpuprofile).

Every scenario also prints what its measured phase cost per job worked:
cpu_us_per_job_pg (PostgreSQL's postmaster and its children, when it runs
on this machine), _coordinator, _nats (their processes), _bench (this
process: executors and clients, and whatever runs in it) and _total, in
microseconds of CPU time; wal_bytes_per_job; and commits_per_job (the
transactions that wrote and committed). Both PostgreSQL figures are the
whole server's.

Scenarios:
  drain     submit --jobs no-op jobs over 10 groups, time until all succeed
  latency   an idle system, one job at a time: submit-to-start, submit-to-success
  steady    --rate jobs/s for --duration: end-to-end latency under load
  fairness  group A: 2,000 jobs of 5 ms, then group B: 20 jobs; 10 slots
  short-jobs --short-jobs jobs of 5 ms, all due at once 1 s after their submission,
            on 11 slots (or --slots if given): how busy the slots were
  scale     selection time and drain rate with 10k, 100k, 1M waiting jobs in 10,000 groups
            (200 bytes of arguments each), and the coordinator's memory
  history   the drain with --history finished jobs kept, against an empty database,
            and while the coordinator prunes them (retention)
  features  the drain plain, with concurrency limits in force, and as dependency
            chains; the fairness case plain and with every group limited to
            half the slots
  ingest    --jobs held submissions from --groups groups at once, and 20 of a
            late group meanwhile: stored/s, the late group's wait, memory
  shares    two groups with jobs of 100 ms and 10 ms, both waiting, on 10 slots:
            each group's share of the slot-time counting jobs, sharing time,
            and sharing time with weights 3 and 1, against the arithmetic
  failover  --jobs waiting (200 bytes of arguments each), two coordinators in their own processes; the
            journal's leader SIGKILLed while it dispatches: when dispatch
            resumes, and the new leader's memory
  partition-down  --rate jobs/s for --duration over 4+ partitions on 2+ PostgreSQL
            clusters (--partitions, --pg-clusters): in its middle third the last
            cluster's database (--down-cluster's: 1 is the home) refuses every
            connection; the other partitions' throughput meanwhile, when the
            downed ones resume, nothing lost or run twice
  all       every scenario in turn

--partitions P runs the cluster with P partitions (database.partitions) and
--pg-clusters N spreads them over N PostgreSQL clusters (partition p on
cluster p mod N): the first is dev's (or --database-url's), the others
throwaway clusters this command starts under <dev-dir>/bench-pg-<k> and
stops after, each measured apart (cpu_us_per_job_pg_<k>). The drain,
latency, steady, fairness, short-jobs, ingest, shares and partition-down
scenarios run so.

--executor python or node runs the drain and short-jobs scenarios on the
Python or TypeScript package's executor (their conformance program, in
<clients-dir>/python and <clients-dir>/typescript: run from the repository's
root, the TypeScript package built with npm ci && npm run build), in a
process of its own: cpu_us_per_job_executor is its CPU time, and the
drain's jobs sleep 0 ms (a no-op task), short-jobs' 5 ms.

Without --database-url it uses the PostgreSQL of 'fairway dev' (started from
<dev-dir>/pg if it is not running); without --nats-url an embedded NATS
server. Durability stays on; the output names the server's settings.`,
		Example: `  fairway bench --scenario drain
  fairway bench --scenario shares
  fairway bench --scenario short-jobs --fairness time
  fairway bench --scenario all --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (rerr error) {
			// The executor first: a wrong one is said before PostgreSQL starts.
			var err error
			if opts.ExecutorCommand, opts.ExecutorEnv, err = benchExecutor(executorKind, clientsDir); err != nil {
				return err
			}
			ctx := cmd.Context()
			opts.ServerURL = e.cfg.Database.URL
			if opts.ServerURL == "" {
				pg, err := pgserver.Start(ctx, pgserver.Options{Dir: filepath.Join(e.cfg.Dev.Dir, "pg"), Port: e.cfg.Dev.PGPort, Logger: e.log})
				if err != nil {
					return err
				}
				defer func() {
					if err := pg.Stop(); err != nil {
						e.log.Warn("bench: cannot stop its PostgreSQL", "error", err)
					}
				}()
				opts.ServerURL = pg.URL()
			}
			if pgClusters > 1 {
				stop, err := e.startBenchClusters(ctx, pgClusters-1, &opts)
				defer stop()
				if err != nil {
					return err
				}
			}
			if e.cfg.Source("nats.url") != config.SourceDefault {
				opts.NATSURL = e.cfg.NATS.URL
				var err error
				if opts.NATSOptions, err = natsconn.Options(e.cfg.NATS); err != nil {
					return err
				}
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile) //nolint:gosec // G304: the file the user named
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					_ = f.Close() // the error to report is the profile's
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer func() {
					pprof.StopCPUProfile()
					if err := f.Close(); err != nil && rerr == nil {
						rerr = fmt.Errorf("--cpuprofile: %w", err)
					}
				}()
			}
			if memProfile != "" {
				// Made now, so that a path that cannot be written says so
				// before the run, not after it.
				f, err := os.Create(memProfile) //nolint:gosec // G304: the file the user named
				if err != nil {
					return fmt.Errorf("--memprofile: %w", err)
				}
				defer func() {
					if err := writeAllocsProfile(f); err != nil && rerr == nil {
						rerr = fmt.Errorf("--memprofile: %w", err)
					}
				}()
			}
			if !inProcess {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("finding this program to run the coordinator: %w (try --in-process)", err)
				}
				opts.CoordinatorCommand = []string{exe, "coordinator"}
				opts.CoordinatorEnv = natsEnv(e.cfg.NATS)
				opts.NATSCommand = []string{exe, benchNATSCommand}
			}
			// short-jobs runs on 11 slots unless --slots was given.
			opts.ShortJobSlots = 11
			if cmd.Flags().Changed("slots") {
				opts.ShortJobSlots = opts.Slots
			}
			opts.Out = e.stdout
			opts.Logger = e.log
			// At the default level the coordinator and executors log only
			// warnings and errors: a line per job would flood the terminal
			// and cost the figures CPU (--log-level debug shows them all).
			if level, _ := logging.ParseLevel(e.cfg.Log.Level); level == slog.LevelInfo {
				var err error
				if opts.ComponentLogger, err = logging.New(e.stderr, "warn", e.cfg.Log.Format); err != nil {
					return err
				}
			}
			return bench.Run(ctx, scenario, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenario, "scenario", "drain", "drain, latency, steady, fairness, short-jobs, scale, history, features, ingest, shares, failover (the journal's leader killed), partition-down (a partition's database down) or all")
	f.IntVar(&opts.Groups, "groups", 1, "groups that submit the ingest scenario's burst")
	f.BoolVar(&opts.TenantStreams, "tenant-streams", false, "the ingest scenario gives each group a submit stream of its own, as tenants have in operator mode")
	f.BoolVar(&opts.Single, "single", false, "the ingest scenario publishes each submission as a message of its own (as clients in other languages do), not 100 to a message")
	f.IntVar(&opts.Jobs, "jobs", 100_000, "jobs in the drain backlog")
	f.IntVar(&opts.Slots, "slots", 100, "pool size of the executor (fairness uses 10; short-jobs 11 unless --slots is given)")
	f.IntVar(&opts.ShortJobs, "short-jobs", 1000, "jobs of 5 ms in the short-jobs scenario")
	f.IntVar(&opts.Rate, "rate", 5000, "jobs per second in the steady scenario")
	f.DurationVar(&opts.Duration, "duration", 10*time.Second, "length of the steady scenario")
	f.IntVar(&opts.DownCluster, "down-cluster", 0, "the PostgreSQL cluster the partition-down scenario takes down: 1 is the first (the home database), the default the last")
	f.IntSliceVar(&opts.ScaleSizes, "scale-sizes", []int{10_000, 100_000, 1_000_000}, "queue lengths of the scale scenario")
	f.IntVar(&opts.History, "history", 1_000_000, "finished jobs kept in the history scenario")
	f.IntVar(&opts.NoisyTenants, "noisy-tenants", 10, "tenants that each submit 2,000 jobs before B in the fairness scenario's second case (-1 skips it)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a Go CPU profile of the whole run to this file (read it with 'go tool pprof')")
	f.StringVar(&memProfile, "memprofile", "", "write a Go profile of the whole run's allocations (by place and bytes) to this file at its end; with --in-process it includes the coordinator's and the NATS server's")
	f.StringVar(&opts.Fairness, "fairness", "", "the coordinator's scheduler.fairness (jobs or time) in every scenario but shares, which runs both (default: jobs)")
	f.BoolVar(&opts.JSON, "json", false, "print one JSON object per scenario")
	f.StringVar(&executorKind, "executor", "go", "the executor of the drain and short-jobs scenarios: go (in this process), python or node (the package's conformance program, a process of its own)")
	f.StringVar(&clientsDir, "clients-dir", "clients", "the directory of the Python and TypeScript packages, for --executor python|node")
	f.IntVar(&opts.Partitions, "partitions", 1, "the cluster's partitions (database.partitions), spread over --pg-clusters")
	f.IntVar(&pgClusters, "pg-clusters", 1, "PostgreSQL clusters that hold the partitions: the first is the bench's database server, the others throwaway local clusters started for the run")
	f.BoolVar(&inProcess, "in-process", false, "run the coordinator and the NATS server in this process instead of their own (their memory and CPU are then not measured apart)")
	return e.withConfig(cmd, "database.url", "nats.url", "dev.dir", "dev.pg-port")
}

// startBenchClusters starts n throwaway PostgreSQL clusters next to dev's
// (<dev-dir>/bench-pg-<k>, on free ports) for the partitions of a bench
// run, and names them in opts.PartitionServers. stop stops those started,
// also when one failed to start.
func (e *env) startBenchClusters(ctx context.Context, n int, opts *bench.Options) (stop func(), err error) {
	var started []*pgserver.Server
	stop = func() {
		for _, pg := range started {
			if err := pg.Stop(); err != nil {
				e.log.Warn("bench: cannot stop a PostgreSQL cluster of its partitions", "error", err)
			}
		}
	}
	if opts.Partitions <= n {
		return stop, fmt.Errorf("--pg-clusters %d needs --partitions above %d, so that each cluster holds a partition", n+1, n)
	}
	for k := 1; k <= n; k++ {
		dir := filepath.Join(e.cfg.Dev.Dir, fmt.Sprintf("bench-pg-%d", k))
		e.log.Info("bench: starting a PostgreSQL cluster for the partitions", "cluster", k+1, "dir", dir)
		pg, err := pgserver.Start(ctx, pgserver.Options{Dir: dir, Logger: e.log})
		if err != nil {
			return stop, fmt.Errorf("--pg-clusters: cluster %d: %w", k+1, err)
		}
		started = append(started, pg)
		opts.PartitionServers = append(opts.PartitionServers, pg.URL())
	}
	return stop, nil
}

// benchNATSCommand is the hidden command that runs the NATS server of
// 'fairway bench' in a process of its own.
const benchNATSCommand = "bench-nats"

// newBenchNATSCmd is 'fairway bench-nats': the embedded NATS server (with
// JetStream, as 'fairway bench' runs it in process) alone, on loopback.
// It prints its client URL on a line once it accepts connections, and
// stops when its stdin closes (the bench process holds the other end) or
// on SIGINT/SIGTERM. Hidden: only 'fairway bench' runs it.
func newBenchNATSCmd(e *env) *cobra.Command {
	var dir string
	var port int
	cmd := &cobra.Command{
		Use:    benchNATSCommand,
		Short:  "Run the NATS server of 'fairway bench' (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{fmt.Errorf("--store-dir is required")}
			}
			s, err := natsserver.Start(natsserver.Options{StoreDir: dir, Port: port})
			if err != nil {
				return err
			}
			defer func() { s.Shutdown(); s.WaitForShutdown() }()
			fmt.Fprintln(e.stdout, s.ClientURL())
			stdinClosed := make(chan struct{})
			go func() {
				_, _ = io.Copy(io.Discard, os.Stdin)
				close(stdinClosed)
			}()
			select {
			case <-cmd.Context().Done():
			case <-stdinClosed:
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "store-dir", "", "JetStream's directory")
	cmd.Flags().IntVar(&port, "port", -1, "client port on 127.0.0.1 (-1: a free one)")
	return cmd
}

// writeAllocsProfile writes the allocations made since the process began
// (pprof's allocs profile: alloc_space, alloc_objects) to f, and closes
// it: after a collection, which brings the profile up to date.
func writeAllocsProfile(f *os.File) error {
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close() // the error to report is the profile's
		return err
	}
	return f.Close()
}

// benchExecutor is the command (and environment) of the executor that
// --executor names: none for go (the bench's own, in its process), else
// the conformance program of the Python or TypeScript package under dir.
func benchExecutor(kind, dir string) ([]string, []string, error) {
	var program, interp string
	var env []string
	switch kind {
	case "go", "":
		return nil, nil, nil
	case "python":
		program, interp = filepath.Join(dir, "python", "conformance_executor.py"), "python3"
		env = []string{"PYTHONPATH=" + filepath.Join(dir, "python", "src")}
	case "node":
		program, interp = filepath.Join(dir, "typescript", "conformance-executor.mjs"), "node"
		if _, err := os.Stat(filepath.Join(dir, "typescript", "dist", "index.js")); err != nil {
			return nil, nil, fmt.Errorf("--executor node: the TypeScript package is not built (%v): run npm ci && npm run build in %s", err, filepath.Join(dir, "typescript"))
		}
	default:
		return nil, nil, fmt.Errorf("--executor %q: use go, python or node", kind)
	}
	if _, err := os.Stat(program); err != nil {
		return nil, nil, fmt.Errorf("--executor %s: %v: run fairway bench from the repository's root, or give --clients-dir", kind, err)
	}
	path, err := exec.LookPath(interp)
	if err != nil {
		return nil, nil, fmt.Errorf("--executor %s needs %s on PATH: %w", kind, interp, err)
	}
	abs, err := filepath.Abs(program)
	if err != nil {
		return nil, nil, err
	}
	for i, e := range env {
		k, v, _ := strings.Cut(e, "=")
		if a, err := filepath.Abs(v); err == nil {
			env[i] = k + "=" + a
		}
	}
	return []string{path, abs}, env, nil
}
