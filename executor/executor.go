// Package executor runs task code for Fairway. An Executor needs only a
// NATS connection: it registers with the coordinators, asks them for jobs
// whenever it has free slots, runs each job's handler in a bounded pool,
// and reports starts, progress, log lines and outcomes to JetStream.
//
//	exec, err := executor.New(nc, executor.Config{AppID: "worker-1"})
//	exec.Handle("resize", func(ctx context.Context, job *executor.Job) error {
//		var args ResizeArgs
//		if err := job.Bind(&args); err != nil {
//			return err
//		}
//		job.Logger.Info("resizing", "width", args.Width)
//		return job.SetResult(map[string]int{"bytes": n})
//	})
//	if err := exec.Start(ctx); err != nil { ... }
//	defer exec.Shutdown(drainCtx)
//
// A handler's return value decides the job's fate: nil is success, an error
// is a failed attempt that the coordinator retries while retries remain,
// and fairway.Permanent(err) fails the job at once. A cancelled job sees its
// context cancelled; so does a running job when Shutdown runs out of time,
// and such a job is handed back to be run again elsewhere.
//
// The wire protocol (all subjects from events.Subjects):
//
//	request    <p>.exec.<app-id>.register      events.RegisterRequest -> events.Reply
//	request    <p>.exec.<app-id>.dispatch      events.DispatchRequest -> events.DispatchReply
//	publish    <p>.exec.<app-id>.heartbeat     events.Heartbeat, every Heartbeat
//	JetStream  <p>.results.<app-id>            events.Report: started, progress, log, done
//	subscribe  <p>.executor.<app-id>.cancel    events.CancelCommand; a request gets an empty events.Reply
//	subscribe  <p>.executor.<app-id>.ping      a request gets the instance id (the reply
//	                                           subject is <p>.exec.<app-id>.pong.<nonce>)
//	subscribe  <p>.notify.work                 wakes an idle executor
//
// Every report carries a unique Nats-Msg-Id. A job's reports are published
// in order (started, log and progress, done), but a report that JetStream
// fails to store is sent again later, so a consumer must tolerate a late
// started, log or progress report after done. Jobs that never run
// (cancelled before they arrived, released at shutdown, no handler) get a
// done report without a started one.
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
)

// Timings that are not worth a setting.
const (
	registerTimeout    = 2 * time.Second                  // one register request
	registerRetry      = time.Second                      // pause between register attempts
	dispatchTimeout    = longPoll + 1500*time.Millisecond // one dispatch request: its long poll and a claim under load; sent again under its id when it runs out (a coordinator that died holding it)
	longPoll           = time.Second                      // how long a coordinator may hold a dispatch request
	dispatchBackoff    = time.Second                      // pause after a failed dispatch
	noCoordinatorLog   = time.Minute                      // at most one "no coordinator" warning per period
	releaseGrace       = 5 * time.Second                  // how long a cancelled handler may take to return at shutdown
	reportFlushTimeout = 5 * time.Second                  // how long Shutdown waits for JetStream to acknowledge reports
	deregisterTimeout  = 2 * time.Second                  // how long Shutdown waits for a coordinator to take note that it left
	stoppingTimeout    = 2 * time.Second                  // how long Shutdown waits for the leader to take note that it stops, before releasing jobs
	earlyCancelTTL     = time.Minute                      // how long a cancel for an unknown job is remembered
	earlyCancelMax     = 10000                            // how many such cancels are remembered
	ranTTL             = 10 * time.Minute                 // how long an attempt this executor ran is remembered (Executor.ran)
	ranMax             = 50000                            // how many such attempts are remembered
)

// Handler runs one job. It returns nil on success; an error fails the
// attempt, and the coordinator retries the job while retries remain;
// fairway.Permanent(err) fails the job without retries. ctx is cancelled
// when the job is cancelled or when Shutdown runs out of time; the handler
// should then return promptly. A panic is recovered and fails the attempt.
type Handler func(ctx context.Context, job *Job) error

// ErrJobsReleased is in the error of a Shutdown whose context ended before
// the running jobs did: they were released (back to waiting, no failed
// attempt). Nothing was lost, so a program may treat it as a clean stop.
var ErrJobsReleased = errors.New("running jobs released")

// Errors used as context causes, to tell why a job's context ended.
var (
	errCancelRequested = errors.New("job cancelled")
	errShutdown        = errors.New("executor shutting down")
	errJobDone         = errors.New("job finished")
	errTimeout         = errors.New("job timed out")
	errPaused          = errors.New("task paused")
	errHeldTooLong     = errors.New("held too long for a slot")
)

// Executor runs jobs that the coordinators hand it. Create it with New,
// register handlers with Handle, then Start it; Shutdown or Stop ends it.
type Executor struct {
	nc       *nats.Conn
	cfg      Config
	subjects events.Subjects
	logger   *slog.Logger
	metrics  *execMetrics
	tracer   trace.Tracer
	handlers map[string]Handler
	// middleware wraps every handler, the first added outermost; chained
	// holds the handlers wrapped, made by Start.
	middleware []Middleware
	chained    map[string]Handler
	reports    *reporter
	logs       *logBuffer
	// registered: Start succeeded (Registered).
	registered atomic.Bool

	// pubMu orders a job's reports: pending logs and progress are taken
	// from the buffer and published under it, before the done report.
	pubMu sync.Mutex

	startMu sync.Mutex // held by Start; shutdown takes it to wait for Start

	mu       sync.Mutex
	life     lifecycle
	instance string
	// tasks are the tasks the executor asks jobs for (sorted): those with
	// a handler, less the paused ones. pool is its slots (PoolSize, or
	// SetConcurrency's); pausedAll stops it asking for any job.
	tasks     []string
	pool      int
	paused    map[string]bool
	pausedAll bool
	// dropped are the tasks Unhandle removed (a job of one is released,
	// not failed: a dispatch asked for it before).
	dropped map[string]bool
	// maxConcurrent caps, per task, the jobs of it running at once here
	// (max-concurrent); a task absent is bounded by the pool only.
	maxConcurrent map[string]int
	started       time.Time
	baseCtx       context.Context
	jobs          map[fairway.JobRef]*runningJob
	cancels       cancelMemo
	// ran remembers the attempts this executor ran: one handed out again
	// (its reports not yet stored, the coordinator handed out what it
	// still took for held) is not run again.
	ran cancelMemo
	// runningN counts the jobs holding one of the pool's slots; queued are
	// the jobs held beyond them (prefetched), waiting for one, in order.
	// prefetchMax bounds those (Config.Prefetch); avgRun and avgRTT, the
	// average run time of a handler and round trip of a dispatch request
	// (ns), size them (see prefetchTarget).
	runningN       int
	queued         []*runningJob
	prefetchMax    int
	avgRun, avgRTT float64
	subs           []*nats.Subscription

	wake chan struct{} // capacity 1: new work may be available
	// backoff is the pause after a failed dispatch (dispatchBackoff; a
	// test's own).
	backoff      time.Duration
	stopCh       chan struct{} // closed when Shutdown begins
	forceCh      chan struct{} // closed when a Shutdown's context ends first
	dispatchDone chan struct{} // closed when the dispatch loop has returned
	bgStop       chan struct{} // stops the heartbeat and log flusher
	bgWG         sync.WaitGroup
	jobsWG       sync.WaitGroup

	drainCh   chan struct{} // closed when an operator asks this executor to drain
	drainOnce sync.Once

	shutdownOnce sync.Once
	forceOnce    sync.Once
	forceErr     error
	forcedJobs   int
	done         chan struct{} // closed when shutdown has finished
	shutdownErr  error

	noCoordinatorAt time.Time // last "no coordinator" warning, dispatch loop only
	// dispatchID names the dispatch request being made; it is kept until
	// an answer comes (dispatch loop only).
	dispatchID string
	// registeredAgainAt is when the instance last registered again
	// (dispatch loop only).
	registeredAgainAt time.Time
	// lastFull says the last dispatch reply filled every slot asked for
	// (dispatch loop only): the next request finds work waiting, so its
	// time is a round trip (see observeRTT).
	lastFull bool
}

// New returns an executor that talks to the coordinators over nc. It
// checks cfg after filling in defaults; errors name the field.
func New(nc *nats.Conn, cfg Config) (*Executor, error) {
	if nc == nil {
		return nil, errors.New("executor: a NATS connection is required")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("executor config: %w", err)
	}
	logger := cfg.Logger.With("executor", cfg.AppID)
	subjects := events.NewSubjects(cfg.Prefix)
	e := &Executor{
		nc:           nc,
		cfg:          cfg,
		subjects:     subjects,
		logger:       logger,
		tracer:       cfg.Tracer.Tracer(TracerName),
		handlers:     make(map[string]Handler),
		logs:         newLogBuffer(cfg.LogBufferSize),
		jobs:         make(map[fairway.JobRef]*runningJob),
		cancels:      cancelMemo{ttl: earlyCancelTTL, max: earlyCancelMax},
		ran:          cancelMemo{ttl: ranTTL, max: ranMax},
		wake:         make(chan struct{}, 1),
		backoff:      dispatchBackoff,
		stopCh:       make(chan struct{}),
		forceCh:      make(chan struct{}),
		dispatchDone: make(chan struct{}),
		bgStop:       make(chan struct{}),
		done:         make(chan struct{}),
		drainCh:      make(chan struct{}),
		pool:         cfg.PoolSize,
		prefetchMax:  max(cfg.Prefetch, 0),
		paused:       map[string]bool{},
		dropped:      map[string]bool{},
	}
	e.maxConcurrent = maps.Clone(cfg.MaxConcurrent)
	if e.maxConcurrent == nil {
		e.maxConcurrent = map[string]int{}
	}
	rep, err := newReporter(nc, subjects.Results(cfg.AppID), subjects.ResultStream(), logger)
	if err != nil {
		return nil, fmt.Errorf("executor %q: %w", cfg.AppID, err)
	}
	e.reports = rep
	e.metrics = newExecMetrics(cfg.Metrics, e)
	return e, nil
}

// Handle registers h as the handler of task, before Start or while the
// executor runs (Exq's subscribe): the coordinators are told at once, and
// jobs of task come from the next dispatch on. Options set the task's
// MaxConcurrent. It panics when task is not a valid task name, h is nil,
// task already has a handler, or the executor is starting or stopping:
// all programming errors.
func (e *Executor) Handle(task string, h Handler, opts ...HandleOption) {
	if err := fairway.CheckName("task", task); err != nil {
		panic(fmt.Sprintf("executor.Handle: %v", err))
	}
	if h == nil {
		panic(fmt.Sprintf("executor.Handle: nil handler for task %q", task))
	}
	e.mu.Lock()
	if e.life != lifeNew && e.life != lifeRunning {
		e.mu.Unlock()
		panic(fmt.Sprintf("executor.Handle: task %q registered while the executor starts or stops", task))
	}
	if _, dup := e.handlers[task]; dup {
		e.mu.Unlock()
		panic(fmt.Sprintf("executor.Handle: task %q already has a handler", task))
	}
	e.handlers[task] = h
	delete(e.dropped, task)
	for _, opt := range opts {
		opt(e, task)
	}
	running := e.life == lifeRunning
	if running {
		e.chained[task] = e.chain(h)
		e.setTasks()
	}
	e.mu.Unlock()
	if running {
		e.reregister("now handles task " + task)
	}
}

// HandleOption is an option of Handle.
type HandleOption func(e *Executor, task string)

// MaxConcurrent caps the jobs of the task that this executor runs at once
// (Exq's per-queue concurrency): with free slots beyond n, it takes jobs
// of its other tasks, never more of this one. n < 1 panics.
func MaxConcurrent(n int) HandleOption {
	if n < 1 {
		panic(fmt.Sprintf("executor.MaxConcurrent: %d is less than 1", n))
	}
	return func(e *Executor, task string) { e.maxConcurrent[task] = n }
}

// SetMaxConcurrent changes the cap of task's jobs running at once on this
// executor, while it runs or before; 0 removes the cap. Jobs running
// beyond a lowered cap finish; no new one starts until they are below it.
func (e *Executor) SetMaxConcurrent(task string, n int) error {
	if err := fairway.CheckName("task", task); err != nil {
		return err
	}
	if n < 0 {
		return fairway.Invalid("max_concurrent", "%d is negative (0 removes the cap)", n)
	}
	e.mu.Lock()
	if n == 0 {
		delete(e.maxConcurrent, task)
	} else {
		e.maxConcurrent[task] = n
	}
	e.mu.Unlock()
	e.signal()
	return nil
}

// Middleware wraps a handler: it runs code before and after the handler
// (or instead of it), for logging, metrics, panics or a tenant's context.
// It returns the handler to call; it may change the ctx it passes on, and
// what the handler returns.
type Middleware func(next Handler) Handler

// Use adds middleware that wraps every task's handler (Exq's middleware,
// River's hooks). Call it before Start. The first middleware added is the
// outermost: Use(a, b) runs a, then b, then the handler, and returns
// through b, then a. A panic in a middleware fails the attempt, as one in
// a handler does. It panics when a middleware is nil or the executor has
// started: programming errors.
func (e *Executor) Use(mw ...Middleware) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.life != lifeNew {
		panic("executor.Use: middleware added after Start or Shutdown")
	}
	for _, m := range mw {
		if m == nil {
			panic("executor.Use: nil middleware")
		}
	}
	e.middleware = append(e.middleware, mw...)
}

// chain wraps h in the executor's middleware.
func (e *Executor) chain(h Handler) Handler {
	for i := len(e.middleware) - 1; i >= 0; i-- {
		h = e.middleware[i](h)
	}
	return h
}

// Running returns how many jobs the executor holds: running, or finished
// but not yet reported.
func (e *Executor) Running() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.jobs)
}
