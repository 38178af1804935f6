package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/config"
	"github.com/fairwayhq/fairway/internal/demo"
	"github.com/fairwayhq/fairway/internal/gcpace"
	"github.com/fairwayhq/fairway/internal/httpedge"
	"github.com/fairwayhq/fairway/internal/natsserver"
	"github.com/fairwayhq/fairway/internal/pgserver"
	"github.com/fairwayhq/fairway/internal/storeaccess"
	"github.com/fairwayhq/fairway/store"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
)

var (
	coordinatorKeys = append([]string{"database.url", "database.partitions", "database.partition-urls", "nats.url", "nats.prefix", "nats.replicas", "scheduler.counting-scheme", "scheduler.fairness", "scheduler.retries",
		"scheduler.retry-delay", "coordinator.max-args-size", "coordinator.lease", "coordinator.ingest-batch", "coordinator.event-per-message",
		"coordinator.api-workers", "coordinator.api-group-workers", "coordinator.api-queue", "coordinator.quota.api-rate", "coordinator.quota.api-burst",
		"coordinator.quota.jobs", "coordinator.quota.submit-rate", "coordinator.quota.submit-burst",
		"coordinator.quota.submit-bytes-rate", "coordinator.quota.submit-bytes-burst", "coordinator.memory-limit", "coordinator.gc-headroom", "coordinator.gc-heap-floor",
		"coordinator.retention.success", "coordinator.retention.failed", "coordinator.retention.cancelled",
		"nats.submit-max-bytes", "nats.submit-max-msgs", "nats.results-max-bytes", "nats.executor-results-max-bytes", "nats.events-max-bytes", "nats.dead-max-bytes", "nats.dead-max-age"},
		tracingKeys...)
	// coordinatorOnlyKeys are those of `fairway coordinator` that dev does
	// without: dev serves the coordinator's metrics on the executor's
	// endpoint.
	coordinatorOnlyKeys = []string{"coordinator.metrics-addr"}
	executorKeys        = []string{"nats.url", "nats.prefix", "executor.app-id", "scheduler.pool-size", "scheduler.prefetch", "scheduler.log-buffer-size",
		"scheduler.wakeup-period", "executor.heartbeat", "executor.http-addr", "executor.http-token", "executor.http-token-file", "executor.drain-timeout",
		"executor.max-concurrent"}
	// tracingKeys are the coordinator's (so dev's) and the executor's.
	tracingKeys = []string{"tracing.endpoint", "tracing.sample-ratio", "tracing.service-name"}
)

func newDevCmd(e *env) *cobra.Command {
	keys := append(append(append([]string{"dev.dir", "dev.nats-addr", "dev.pg-port", "dev.tenants"}, coordinatorKeys...), executorKeys[2:]...), webKeys[2:]...)
	return groupedFlags(e.withConfig(&cobra.Command{
		Use:   "dev",
		Short: "Run the whole system in one process, for development",
		Long: `Run Fairway in one process: an embedded NATS server with JetStream (data in
<dev-dir>/nats, listening on --nats-addr), a PostgreSQL server that Fairway
starts itself from the PostgreSQL binaries on PATH or in
/usr/lib/postgresql/*/bin (data in <dev-dir>/pg, port --pg-port; its
superuser's password in <dev-dir>/pg.password, mode 0600), a coordinator,
and an executor with the demo tasks ` + demoTasks() + `.

--tenants acme,globex isolates tenants as production does: the embedded NATS
runs in operator mode, each tenant and the executor are NATS accounts of their
own, and their credentials are written to <dev-dir>/creds (tenant-<group>.creds,
operator.creds, executor-<app-id>.creds). 'fairway creds add' issues more.

A failed job is retried after 5 s in dev (scheduler.retry-delay; 1m
elsewhere), so that the fail demo moves while you watch.

--database-url and --nats-url use external servers instead. Ctrl-C stops
everything, PostgreSQL included, once the running jobs have finished (at most
--drain-timeout); a second Ctrl-C cancels them (they go back to waiting, no
attempt counted, their logs kept), and a third exits at once. The data stays
for the next run.

One fairway dev runs per dev dir: it locks <dev-dir>/dev.lock before it starts
anything, and a second one on the same directory exits at once, naming the
process that holds it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return e.runDev(cmd.Context()) },
	}, keys...))
}

// demoTasks lists the demo tasks for the help: "echo, sleep, … and snooze".
func demoTasks() string {
	names := demo.Tasks()
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// devRetryDelay is scheduler.retry-delay in fairway dev unless set: the
// fail demo retries while its user watches, not a minute later.
const devRetryDelay = 5 * time.Second

func (e *env) runDev(ctx context.Context) error {
	cfg := e.cfg
	if cfg.Source("scheduler.retry-delay") == config.SourceDefault {
		cfg.Scheduler.RetryDelay = devRetryDelay
	}
	// 0755: as root, PostgreSQL runs as the postgres user, which must enter it.
	if err := os.MkdirAll(cfg.Dev.Dir, 0o755); err != nil { //nolint:gosec // G301: see above
		return fmt.Errorf("creating %s: %w", cfg.Dev.Dir, err)
	}
	// Before anything starts on the dev dir's data, and released after
	// everything stopped (the last defer to run).
	unlock, err := lockDevDir(cfg.Dev.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	tenants := cfg.Dev.TenantList()
	connect, executorConnect := e.connect, e.connect
	var credsDir string
	clientURL := cfg.NATS.URL // where the banner's commands find NATS
	if cfg.Source("nats.url") == config.SourceDefault {
		host, port, err := splitHostPort(cfg.Dev.NATSAddr)
		if err != nil {
			return fmt.Errorf("dev.nats-addr: %w", err)
		}
		if err := checkDevListen(cfg.Dev.NATSAddr, len(tenants) > 0); err != nil {
			return err
		}
		opts := natsserver.Options{StoreDir: filepath.Join(cfg.Dev.Dir, "nats"), Host: host, Port: port, Logger: e.log.With("component", "nats")}
		if len(tenants) > 0 {
			if opts.Accounts, credsDir, err = devAccounts(cfg.Dev.Dir, cfg.NATS.Prefix, tenants, executorAppID(cfg)); err != nil {
				return err
			}
			opts.StoreDir = filepath.Join(cfg.Dev.Dir, "nats-accounts") // JetStream keeps each account's streams apart
			opts.ResolverDir = filepath.Join(cfg.Dev.Dir, resolverDirName)
		}
		ns, err := natsserver.Start(opts)
		if err != nil {
			return err
		}
		defer func() {
			ns.Shutdown()
			ns.WaitForShutdown()
			e.log.Info("NATS stopped")
		}()
		e.log.Info("NATS ready", "url", ns.ClientURL(), "store_dir", opts.StoreDir, "tenants", cfg.Dev.Tenants)
		clientURL = ns.ClientURL()
		unrecord := e.recordDev(cfg.Dev.Dir, ns.ClientURL()) // <dev-dir>/dev.json: where the other commands find this NATS
		defer unrecord()
		connect = func(name string) (*nats.Conn, error) { return natsserver.Connect(ns, name) }
		executorConnect = connect
		if credsDir != "" {
			connect = func(name string) (*nats.Conn, error) {
				return natsserver.Connect(ns, name, nats.UserCredentials(filepath.Join(credsDir, "coordinator.creds")))
			}
			executorConnect = func(name string) (*nats.Conn, error) {
				return natsserver.Connect(ns, name, nats.UserCredentials(filepath.Join(credsDir, "executor-"+executorAppID(cfg)+".creds")))
			}
			for _, t := range tenants {
				tnc, err := natsserver.Connect(ns, "fairway-dev-tenant-setup", nats.UserCredentials(filepath.Join(credsDir, "tenant-"+t+".creds")))
				if err != nil {
					return err
				}
				err = ensureTenantStream(ctx, tnc, cfg.NATS.Prefix)
				tnc.Close()
				if err != nil {
					return fmt.Errorf("tenant %s: %w", t, err)
				}
			}
			fnc, err := connect("fairway-dev-tenant-setup")
			if err != nil {
				return err
			}
			// Each bounded by its own --max-submit-bytes, if set.
			err = ensureTenantSubmitStreamsOf(ctx, fnc, opts.Accounts, cfg.NATS.Prefix, e.streamOptions(), tenants...)
			fnc.Close()
			if err != nil {
				return err
			}
		}
	} else if len(tenants) > 0 {
		return usageError{errors.New("--tenants configures the embedded NATS server; with --nats-url, provision accounts on your server with 'fairway creds'")}
	}
	if cfg.Database.URL == "" {
		pg, err := pgserver.Start(ctx, pgserver.Options{Dir: filepath.Join(cfg.Dev.Dir, "pg"), Port: cfg.Dev.PGPort, Logger: e.log.With("component", "postgres")})
		if err != nil {
			return err
		}
		defer func() {
			if err := pg.Stop(); err != nil {
				e.log.Error("stopping PostgreSQL", "error", err)
			}
		}()
		cfg.Database.URL = pg.URL()
	}
	stop, err := e.startCoordinator(ctx, connect)
	if err != nil {
		return err
	}
	defer stop()
	dashboard := ""
	if cfg.Web.Addr != "" {
		if dashboard, err = e.startDevWeb(ctx, connect); err != nil {
			return err
		}
	}
	nc, err := executorConnect("fairway-dev-executor")
	if err != nil {
		return err
	}
	defer nc.Close()
	// The executor stops first, then, once the coordinator has applied its
	// last reports, the coordinator, PostgreSQL and NATS (the defers).
	e.applyLeftDevReports(connect)
	runExecutor := func() error {
		err := e.runExecutor(ctx, nc)
		e.settleDevReports(connect)
		return err
	}
	if credsDir != "" {
		e.printTenantBanner(absPath(credsDir), tenants, e.devClientEnv(clientURL))
		if dashboard != "" {
			fmt.Fprintf(e.stderr, "Dashboard (logs you in as admin): %s\n\n", dashboard)
		}
		return runExecutor()
	}
	if dashboard != "" {
		dashboard = "\nDashboard (this link logs you in as admin):\n\n  " + dashboard + "\n"
	}
	fmt.Fprintf(e.stderr, `
Fairway is running.%s
From a second terminal:

%s  fairway submit echo --group acme --args '{"hello":"world"}'
  fairway submit sleep --group acme --args '{"seconds":5}'
  fairway submit fail --group acme --args '{"times":2}'
  fairway events tail
  fairway jobs list

(with 'go run ./cmd/fairway' in place of 'fairway' if it is not installed)
Ctrl-C stops everything; a second Ctrl-C cancels the running jobs.

`, dashboard, e.devClientEnv(clientURL))
	return runExecutor()
}

// startDevWeb serves the dashboard of fairway dev, with the tokens of
// web.admin-token and web.read-token or ones of its own in the dev
// directory, and returns a link that logs in as admin (the token rides in
// the fragment, which no server sees).
func (e *env) startDevWeb(ctx context.Context, connect func(string) (*nats.Conn, error)) (string, error) {
	admin, adminFile, err := devWebToken(e.cfg.Web.AdminToken, e.cfg.Dev.Dir, "web-admin.token")
	if err != nil {
		return "", err
	}
	read, readFile, err := devWebToken(e.cfg.Web.ReadToken, e.cfg.Dev.Dir, "web-read.token")
	if err != nil {
		return "", err
	}
	wnc, err := connect("fairway-dev-web")
	if err != nil {
		return "", err
	}
	context.AfterFunc(ctx, wnc.Close)
	url, err := e.startWeb(ctx, wnc, webTokens{admin: admin, read: read, adminFile: adminFile, readFile: readFile})
	if err != nil {
		wnc.Close()
		return "", err
	}
	e.log.Info("dashboard ready", "url", url, "admin_token_file", adminFile, "read_token_file", readFile)
	return url + "#token=" + admin, nil
}

// startCoordinator opens the store, migrates it and starts a coordinator.
func (e *env) startCoordinator(ctx context.Context, connect func(string) (*nats.Conn, error)) (stop func(), err error) {
	cfg := e.cfg
	if cfg.Database.URL == "" {
		return nil, errors.New("database.url is not set: pass --database-url or set FAIRWAY_DATABASE_URL (postgres://user:password@host:5432/db)")
	}
	st, parts, closeStores, err := e.openLayout(ctx, nil)
	if err != nil {
		return nil, err
	}
	nc, err := connect("fairway-coordinator")
	if err != nil {
		closeStores()
		return nil, err
	}
	tracer, err := e.tracer()
	if err != nil {
		nc.Close()
		closeStores()
		return nil, err
	}
	retries := cfg.Scheduler.Retries
	apiRate := float64(cfg.Coordinator.APIRate)
	if apiRate == 0 {
		apiRate = -1 // unlimited
	}
	// The process's memory budget: the garbage collector's soft limit (a
	// limit set by GOMEMLIMIT stays).
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && cfg.Coordinator.MemoryLimit > 0 {
		debug.SetMemoryLimit(cfg.Coordinator.MemoryLimit)
	}
	// And how far the heap may grow past what it holds (a GOGC set
	// stays).
	go gcpace.Keep(ctx, uint64(cfg.Coordinator.GCHeadroom), uint64(cfg.Coordinator.GCHeapFloor), time.Second) //nolint:gosec // G115: sizes, positive
	coord, err := coordinator.New(st, nc, coordinator.Config{
		Prefix:               cfg.NATS.Prefix,
		Scheme:               cfg.Scheduler.CountingScheme,
		Fairness:             cfg.Scheduler.Fairness,
		Retries:              &retries,
		RetryDelay:           cfg.Scheduler.RetryDelay,
		Lease:                cfg.Coordinator.Lease,
		MaxArgsSize:          cfg.Coordinator.MaxArgsSize,
		IngestBatch:          cfg.Coordinator.IngestBatch,
		EventPerMessage:      cfg.Coordinator.EventPerMessage,
		APIWorkers:           cfg.Coordinator.APIWorkers,
		APIGroupWorkers:      cfg.Coordinator.APIGroupWorkers,
		APIQueue:             cfg.Coordinator.APIQueue,
		APIRate:              apiRate,
		APIBurst:             cfg.Coordinator.APIBurst,
		HeartbeatTimeout:     3 * cfg.Executor.Heartbeat,
		StreamOptions:        e.streamOptions(),
		QuotaJobs:            unlimitedIfZero(cfg.Coordinator.QuotaJobs),
		QuotaSubmitRate:      float64(unlimitedIfZero(cfg.Coordinator.QuotaSubmitRate)),
		QuotaSubmitBurst:     cfg.Coordinator.QuotaSubmitBurst,
		QuotaSubmitBytesRate: float64(cfg.Coordinator.QuotaSubmitBytesRate), QuotaSubmitBytesBurst: int(cfg.Coordinator.QuotaSubmitBytesBurst),
		Retention: coordinator.Retention{Success: keepIfZero(cfg.Coordinator.RetentionSuccess),
			Failed: keepIfZero(cfg.Coordinator.RetentionFailed), Cancelled: keepIfZero(cfg.Coordinator.RetentionCancelled)},
		Logger:          e.log.With("component", "coordinator"),
		Metrics:         e.registry(),
		Tracer:          tracer,
		HostClock:       chaosClock(e.log), // nil but in the fault suite's build, see chaosclock.go
		PartitionStores: parts,
	})
	if err == nil {
		// Not stopped by ctx: the caller stops it with stop, which in dev
		// is after the executor has drained and reported its last jobs.
		err = coord.Start(context.WithoutCancel(ctx))
	}
	if err != nil {
		nc.Close()
		closeStores()
		return nil, err
	}
	return func() {
		coord.Stop()
		nc.Close()
		closeStores()
	}, nil
}

// keepIfZero maps a retention of 0 (the configuration's "for ever") to the
// coordinator's negative.
func keepIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func newCoordinatorCmd(e *env) *cobra.Command {
	return groupedFlags(e.withConfig(&cobra.Command{
		Use:   "coordinator",
		Short: "Run a coordinator: ingest, fair selection, recovery, events",
		Long: `Run a coordinator against PostgreSQL (--database-url) and NATS (--nats-url).
Run as many as you like: they share the work and the fairness state. It
applies database migrations at start (under an advisory lock).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stop, err := e.startCoordinator(cmd.Context(), e.connect)
			if err != nil {
				return err
			}
			if addr := e.cfg.Coordinator.MetricsAddr; addr != "" {
				srv, err := serveMetrics(addr, e.registry())
				if err != nil {
					stop()
					return err
				}
				defer stopHTTP(srv)
				e.log.Info("coordinator HTTP endpoint", "metrics", "http://"+addr+"/metrics", "health", "http://"+addr+"/healthz")
			}
			<-cmd.Context().Done()
			e.log.Info("stopping")
			stop()
			return nil
		},
	}, append(coordinatorKeys, coordinatorOnlyKeys...)...))
}

func newExecutorCmd(e *env) *cobra.Command {
	return e.withConfig(&cobra.Command{
		Use:   "executor",
		Short: "Run an executor with the built-in demo tasks",
		Long: `Run an executor that needs only a NATS connection, with the built-in demo
tasks ` + demoTasks() + `. Go programs embed the
executor package with their own tasks instead. Each executor needs its own --app-id (defaults to
the host name).

POST /api/v1/shutdownAndExit on --http-addr (with the bearer token
--http-token, or the one generated into --http-token-file), SIGTERM or
Ctrl-C stop taking
jobs and let the running ones finish (at most --drain-timeout). A second
SIGTERM or Ctrl-C cancels the running jobs: they return to waiting without
counting as a failed attempt. A third exits at once, with code 130.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nc, err := e.connect("fairway-executor")
			if err != nil {
				return err
			}
			defer nc.Close()
			return e.runExecutor(cmd.Context(), nc)
		},
	}, append(executorKeys, tracingKeys...)...)
}

// runExecutor runs an executor with the demo tasks until ctx ends or the
// shutdown endpoint is called, then drains it: it waits for the running
// jobs until executor.drain-timeout passes or e.force closes, then cancels
// them.
func (e *env) runExecutor(ctx context.Context, nc *nats.Conn) error {
	cfg := e.cfg
	appID := executorAppID(cfg)
	tracer, err := e.tracer()
	if err != nil {
		return err
	}
	maxConcurrent, err := config.TaskCounts(cfg.Executor.MaxConcurrent) // checked at load: no error
	if err != nil {
		return err
	}
	ex, err := executor.New(nc, executor.Config{
		AppID:         appID,
		PoolSize:      cfg.Scheduler.PoolSize,
		Prefetch:      cfg.Scheduler.Prefetch,
		LogBufferSize: cfg.Scheduler.LogBufferSize,
		Heartbeat:     cfg.Executor.Heartbeat,
		WakeupPeriod:  cfg.Scheduler.WakeupPeriod,
		Prefix:        cfg.NATS.Prefix,
		Logger:        e.log.With("component", "executor"),
		Metrics:       e.registry(),
		Tracer:        tracer,
		MaxConcurrent: maxConcurrent,
	})
	if err != nil {
		return err
	}
	demo.Register(ex)
	// The HTTP endpoint listens before the executor registers: an address
	// in use fails the start before any job is taken, and once "executor
	// started" is logged, shutdownAndExit is answered. A shutdown asked
	// for during the start (say, while no coordinator answers) ends it.
	shutdown := make(chan struct{})
	if cfg.Executor.HTTPAddr != "" {
		token, tokenFile, err := e.httpToken(appID)
		if err != nil {
			return err
		}
		srv, err := serveHTTP(cfg.Executor.HTTPAddr, token, shutdown, ex.Registered, e.registry())
		if err != nil {
			return err
		}
		defer stopHTTP(srv)
		shutdownHow := "POST /api/v1/shutdownAndExit with Authorization: Bearer <executor.http-token>"
		if tokenFile != "" {
			shutdownHow = fmt.Sprintf(`curl -X POST -H "Authorization: Bearer $(cat %s)" http://%s/api/v1/shutdownAndExit`, tokenFile, cfg.Executor.HTTPAddr)
		}
		e.log.Info("executor HTTP endpoint", "addr", cfg.Executor.HTTPAddr, "shutdown", shutdownHow, "token_file", tokenFile)
	}
	startCtx, cancelStart := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-shutdown:
			cancelStart(errShutdownBeforeStart)
		case <-startCtx.Done():
		}
	}()
	err = ex.Start(startCtx) // logs "executor started"
	stoppedEarly := errors.Is(context.Cause(startCtx), errShutdownBeforeStart)
	cancelStart(nil) // handlers' contexts do not inherit its cancellation
	switch {
	case err != nil && stoppedEarly:
		e.log.Info("shutdown asked for before the executor registered: exiting")
		return nil
	case err != nil && ctx.Err() != nil:
		// Stopped (Ctrl-C, SIGTERM) while it was registering: a clean
		// stop, not a failure.
		e.log.Info("stopped before the executor registered: exiting")
		return nil
	case err != nil:
		return err
	}
	select {
	case <-ctx.Done():
	case <-shutdown:
	case <-ex.DrainRequested():
	case <-e.force:
	}
	e.log.Info("executor draining: no new jobs; waiting for running ones", "running", ex.Running(), "drain_timeout", cfg.Executor.DrainTimeout.String())
	drainCtx, cancel := context.WithTimeoutCause(context.Background(), cfg.Executor.DrainTimeout,
		fmt.Errorf("executor.drain-timeout %s passed: %w", cfg.Executor.DrainTimeout, context.DeadlineExceeded))
	defer cancel()
	drainCtx, cancelDrain := context.WithCancelCause(drainCtx)
	defer cancelDrain(nil)
	go func() {
		select {
		case <-e.force:
			n := ex.Running()
			e.log.Warn(fmt.Sprintf("second signal: cancelling %d running jobs; they return to waiting", n), "running", n)
			cancelDrain(errForced)
		case <-drainCtx.Done():
		}
	}()
	err = ex.Shutdown(drainCtx)
	if onlyReleased(err) {
		// Released jobs go back to waiting without a failed attempt:
		// nothing is lost, so this is a clean stop (exit 0), as in Sidekiq.
		e.log.Warn("executor stopped before its running jobs finished; they were released and run again elsewhere", "reason", err.Error())
		return nil
	}
	return err
}

// onlyReleased says whether err says only that running jobs were released.
func onlyReleased(err error) bool {
	if err == nil {
		return false
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !errors.Is(e, executor.ErrJobsReleased) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, executor.ErrJobsReleased)
}

// errShutdownBeforeStart ends an executor's start when shutdownAndExit
// comes before it registered.
var errShutdownBeforeStart = errors.New("shutdown asked for during the start")

// errForced is why an executor cancelled its running jobs on a second
// signal.
var errForced = fmt.Errorf("cancelled by a second signal: %w", context.Canceled)

// serveHTTP serves Docspell's shutdown endpoint, which requires token (see
// requireToken), a health check, which answers 503 until the executor
// has registered, and the Prometheus metrics of reg.
func serveHTTP(addr, token string, shutdown chan struct{}, registered func() bool, reg *prometheus.Registry) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	var once sync.Once
	mux.HandleFunc("POST /api/v1/shutdownAndExit", requireToken(token, func(w http.ResponseWriter, _ *http.Request) {
		// The whole answer is on the wire before the shutdown begins: a
		// process that stops at once (nothing running, or not registered
		// yet) would otherwise close the connection before it answered.
		body := `{"success":true,"message":"shutting down: no new jobs; exiting when the running ones are done"}` + "\n"
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = io.WriteString(w, body)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		once.Do(func() { close(shutdown) })
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !registered() {
			http.Error(w, "starting: not registered with a coordinator yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return listenAndServe(addr, mux, "executor.http-addr", "pass --http-addr '' to disable it, or another address")
}

// listenAndServe serves mux on addr in the background; an address that
// cannot be listened on fails at once, naming key and what to do.
// stopHTTP stops an HTTP endpoint, letting the requests in progress finish
// their answers (a second at most).
func stopHTTP(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		_ = srv.Close()
	}
}

func listenAndServe(addr string, mux *http.ServeMux, key, hint string) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w (%s)", key, addr, err, hint)
	}
	// Metrics, health checks and the executor's shutdown: few clients, and
	// none may hold connections open (see web.hardened): 64 connections at
	// once, 16 of a client address (one more is answered 503), and a
	// request that does not arrive at httpedge's minimum rate is cut.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
	bounded := httpedge.Wrap(srv, ln, httpedge.Limits{Total: 64, PerAddr: 16})
	go func() { _ = srv.Serve(bounded) }()
	return srv, nil
}

func newMigrateCmd(e *env) *cobra.Command {
	var toJournal bool
	cmd := e.withConfig(&cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations (coordinators also do this at start); --to-journal moves a database of the row engine (before 2026-11-30) onto the journal",
		Long: `Apply the database migrations that the database lacks. Coordinators also do
this at their start.

With --to-journal, then move a database of the row engine, where Fairway
before 2026-11-30 stored jobs and which this version no longer runs (its
coordinators refuse such a database and say so), onto the journal engine, in
one transaction (on a new database, it records the journal as its engine):
its unfinished jobs go into the journal
(each keeps its attempts and its submission time), the groups' weights and the
rate limits too, and the records of ended jobs, their log lines and every id
stay. Stop every
coordinator first (the move is refused while one runs); executors may keep
running. A job an executor held runs again (its executor's report is refused);
a job whose cancel was requested while it ran ends cancelled; a job waiting for
its retry waits until the retry's time as a waiting job; the retries counted
so far start afresh, as after a retry by hand. Then start the coordinators of
this version.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if e.cfg.Database.URL == "" {
				return errors.New("database.url is not set: pass --database-url or set FAIRWAY_DATABASE_URL")
			}
			st, err := store.Open(cmd.Context(), e.cfg.Database.URL, store.Options{})
			if err != nil {
				return err
			}
			defer st.Close()
			applied, err := st.Migrate(cmd.Context())
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintln(e.stdout, "the database is up to date")
			} else {
				fmt.Fprintf(e.stdout, "applied migrations %v\n", applied)
			}
			cluster, err := e.recordLayout(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "cluster %s: %d partition(s), created %s\n", cluster.ID, cluster.Partitions, cluster.Chosen.UTC().Format(time.RFC3339))
			if !toJournal {
				rows, err := storeaccess.Engine(st).OnRowEngine(cmd.Context())
				if err != nil {
					return err
				}
				if rows {
					fmt.Fprintln(e.stdout, "this database's jobs are stored by the row engine, which this version no longer runs: "+
						"stop every coordinator and run 'fairway migrate --to-journal' (see 'fairway migrate --help')")
				}
				return nil
			}
			fmt.Fprintln(e.stdout, "moving the database onto the journal engine (one transaction: nothing changes unless it all does)")
			moved, err := storeaccess.Engine(st).ConvertToJournal(cmd.Context(), func(jobs int) {
				fmt.Fprintf(e.stdout, "  %d unfinished jobs written to the journal\n", jobs)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "the database is on the journal engine: %d unfinished jobs moved (%d held by executors, which run again), %d cancelled (their cancel was requested), %d weights and %d rate limits, in %s\n",
				moved.Jobs, moved.Running, moved.Cancelled, moved.Weights, moved.Rates, moved.Took.Round(time.Millisecond))
			return nil
		},
	}, "database.url", "database.partitions", "database.partition-urls")
	cmd.Flags().BoolVar(&toJournal, "to-journal", false, "then move a database of the row engine onto the journal engine (every coordinator stopped; see the command's help)")
	return cmd
}

func splitHostPort(addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portText)
	return host, port, err
}

// executorAppID is executor.app-id, or the host name made a valid app-id.
func executorAppID(cfg *config.Config) string {
	if cfg.Executor.AppID != "" {
		return cfg.Executor.AppID
	}
	host, _ := os.Hostname()
	return sanitizeToken(host)
}

// printTenantBanner tells how to reach a dev running in operator mode;
// env is what the commands need besides their credentials (devClientEnv).
func (e *env) printTenantBanner(credsDir string, tenants []string, env string) {
	first := tenants[0]
	devDirFlag := "" // creds add finds the operator's keys in the dev dir
	if e.cfg.Source("dev.dir") != config.SourceDefault {
		devDirFlag = " --dev-dir " + shellQuote(absPath(e.cfg.Dev.Dir))
	}
	fmt.Fprintf(e.stderr, `
Fairway is running with tenant isolation: each of %s is a NATS account of its
own. Credentials (standard NATS .creds files) are in %s:

  tenant-<group>.creds   a tenant: its own jobs and events, nothing else
  operator.creds         the operator API (jobs of every group, executors, periodic tasks)

From a second terminal:

%s  fairway submit echo --group %s --args '{"hello":"world"}' --creds %s
  fairway events tail --creds %s
  fairway jobs list --creds %s
  fairway creds add executor worker-2 --tasks echo --groups %s%s      # another executor, for these only

`, strings.Join(tenants, ", "), credsDir, env, first, shellQuote(filepath.Join(credsDir, "tenant-"+first+".creds")),
		shellQuote(filepath.Join(credsDir, "tenant-"+first+".creds")), shellQuote(filepath.Join(credsDir, "operator.creds")), first, devDirFlag)
}

// sanitizeToken makes a host name a valid app-id.
func sanitizeToken(s string) string {
	b := []byte(s)
	for i, c := range b {
		if ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'; !ok {
			b[i] = '-'
		}
	}
	if len(b) == 0 {
		return "executor"
	}
	return string(b)
}

// unlimitedIfZero turns a quota key's 0 (unlimited) into the coordinator's
// negative.
func unlimitedIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// serveMetrics serves a coordinator's Prometheus metrics (GET /metrics)
// and a health check (GET /healthz: the coordinator runs) on addr.
func serveMetrics(addr string, reg *prometheus.Registry) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	return listenAndServe(addr, mux, "coordinator.metrics-addr", "pass another --metrics-addr, or '' for none")
}

// streamOptions are the JetStream streams' settings of the configuration.
func (e *env) streamOptions() events.StreamOptions {
	cfg := e.cfg
	return events.StreamOptions{Replicas: cfg.NATS.Replicas, SubmitMaxBytes: cfg.Coordinator.SubmitMaxBytes, SubmitMaxMsgs: cfg.Coordinator.SubmitMaxMsgs,
		ResultMaxBytes: cfg.Coordinator.ResultsMaxBytes, ExecutorResultMaxBytes: cfg.Coordinator.ExecutorResultsMaxBytes, EventMaxBytes: cfg.Coordinator.EventsMaxBytes, DeadMaxBytes: cfg.Coordinator.DeadMaxBytes, DeadMaxAge: cfg.Coordinator.DeadMaxAge}
}
