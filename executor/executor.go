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
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
)

// Defaults of Config.
const (
	// PoolSizeDefault is the default number of jobs run at once.
	PoolSizeDefault = 4
	// LogBufferSizeDefault is the default bound on job log lines waiting
	// to be sent.
	LogBufferSizeDefault = 500
	// HeartbeatDefault is the default period of heartbeats.
	HeartbeatDefault = 5 * time.Second
	// WakeupPeriodDefault is the default period of an idle executor's
	// unprompted request for work.
	WakeupPeriodDefault = 10 * time.Second
)

// Timings that are not worth a setting.
const (
	registerTimeout    = 2 * time.Second // one register request
	registerRetry      = time.Second     // pause between register attempts
	dispatchTimeout    = 5 * time.Second // one dispatch request
	longPoll           = time.Second     // how long a coordinator may hold a dispatch request
	dispatchBackoff    = time.Second     // pause after a failed dispatch
	noCoordinatorLog   = time.Minute     // at most one "no coordinator" warning per period
	releaseGrace       = 5 * time.Second // how long a cancelled handler may take to return at shutdown
	reportFlushTimeout = 5 * time.Second // how long Shutdown waits for JetStream to acknowledge reports
	earlyCancelTTL     = time.Minute     // how long a cancel for an unknown job is remembered
	earlyCancelMax     = 10000           // how many such cancels are remembered
)

// Config configures an Executor.
type Config struct {
	// AppID names the executor. It must be unique among running executors
	// (the coordinators refuse a second one) and be one NATS subject token:
	// letters, digits, '-' and '_'. Required.
	AppID string
	// PoolSize is how many jobs the executor runs at once. Defaults to
	// PoolSizeDefault (4).
	PoolSize int
	// LogBufferSize bounds the job log lines waiting to be sent; a line
	// logged while the buffer is full is dropped and counted. Defaults to
	// LogBufferSizeDefault (500).
	LogBufferSize int
	// Heartbeat is how often the executor tells the coordinators it is
	// alive and which jobs it holds, renewing their leases. Defaults to
	// HeartbeatDefault (5s).
	Heartbeat time.Duration
	// WakeupPeriod is how often an idle executor asks for work without
	// being notified, in case a notification was lost. Defaults to
	// WakeupPeriodDefault (10s).
	WakeupPeriod time.Duration
	// Prefix is the first token of every subject. Defaults to "fairway".
	Prefix string
	// Host is the host name reported to the coordinators. Defaults to
	// os.Hostname().
	Host string
	// Logger receives the executor's own log. Defaults to discarding it.
	Logger *slog.Logger
}

// WithDefaults returns c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	c.PoolSize = cmp.Or(c.PoolSize, PoolSizeDefault)
	c.LogBufferSize = cmp.Or(c.LogBufferSize, LogBufferSizeDefault)
	c.Heartbeat = cmp.Or(c.Heartbeat, HeartbeatDefault)
	c.WakeupPeriod = cmp.Or(c.WakeupPeriod, WakeupPeriodDefault)
	c.Prefix = cmp.Or(c.Prefix, events.DefaultPrefix)
	if c.Host == "" {
		c.Host, _ = os.Hostname()
		c.Host = cmp.Or(c.Host, "unknown")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.AppID == "" {
		return fairway.Invalid("AppID", "missing: every executor needs a unique app id")
	}
	if err := fairway.CheckName("AppID", c.AppID); err != nil {
		return err
	}
	if err := fairway.CheckName("Prefix", c.Prefix); err != nil {
		return err
	}
	if c.PoolSize < 1 {
		return fairway.Invalid("PoolSize", "%d is less than 1", c.PoolSize)
	}
	if c.LogBufferSize < 1 {
		return fairway.Invalid("LogBufferSize", "%d is less than 1", c.LogBufferSize)
	}
	if c.Heartbeat <= 0 {
		return fairway.Invalid("Heartbeat", "%s is not positive", c.Heartbeat)
	}
	if c.WakeupPeriod <= 0 {
		return fairway.Invalid("WakeupPeriod", "%s is not positive", c.WakeupPeriod)
	}
	return nil
}

// Handler runs one job. It returns nil on success; an error fails the
// attempt, and the coordinator retries the job while retries remain;
// fairway.Permanent(err) fails the job without retries. ctx is cancelled
// when the job is cancelled or when Shutdown runs out of time; the handler
// should then return promptly. A panic is recovered and fails the attempt.
type Handler func(ctx context.Context, job *Job) error

type state int

const (
	stateNew state = iota
	stateStarting
	stateRunning
	stateStopped
)

// ErrJobsReleased is in the error of a Shutdown whose context ended before
// the running jobs did: they were released (back to waiting, no failed
// attempt). Nothing was lost, so a program may treat it as a clean stop.
var ErrJobsReleased = errors.New("running jobs released")

// Errors used as context causes, to tell why a job's context ended.
var (
	errCancelRequested = errors.New("job cancelled")
	errShutdown        = errors.New("executor shutting down")
	errJobDone         = errors.New("job finished")
)

// Executor runs jobs that the coordinators hand it. Create it with New,
// register handlers with Handle, then Start it; Shutdown or Stop ends it.
type Executor struct {
	nc       *nats.Conn
	cfg      Config
	subjects events.Subjects
	logger   *slog.Logger
	handlers map[string]Handler
	reports  *reporter
	logs     *logBuffer

	// pubMu orders a job's reports: pending logs and progress are taken
	// from the buffer and published under it, before the done report.
	pubMu sync.Mutex

	startMu sync.Mutex // held by Start; shutdown takes it to wait for Start

	mu       sync.Mutex
	state    state
	stopping bool // Shutdown has begun: no new jobs are run
	forced   bool // a Shutdown's context ended: running jobs are released
	instance string
	tasks    []string
	started  time.Time
	baseCtx  context.Context
	jobs     map[fairway.JobRef]*runningJob
	cancels  cancelMemo
	subs     []*nats.Subscription

	wake         chan struct{} // capacity 1: new work may be available
	stopCh       chan struct{} // closed when Shutdown begins
	forceCh      chan struct{} // closed when a Shutdown's context ends first
	dispatchDone chan struct{} // closed when the dispatch loop has returned
	bgStop       chan struct{} // stops the heartbeat and log flusher
	bgWG         sync.WaitGroup
	jobsWG       sync.WaitGroup

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
		handlers:     make(map[string]Handler),
		logs:         newLogBuffer(cfg.LogBufferSize),
		jobs:         make(map[fairway.JobRef]*runningJob),
		cancels:      cancelMemo{ttl: earlyCancelTTL, max: earlyCancelMax},
		wake:         make(chan struct{}, 1),
		stopCh:       make(chan struct{}),
		forceCh:      make(chan struct{}),
		dispatchDone: make(chan struct{}),
		bgStop:       make(chan struct{}),
		done:         make(chan struct{}),
	}
	rep, err := newReporter(nc, subjects.Results(cfg.AppID), subjects.ResultStream(), logger)
	if err != nil {
		return nil, fmt.Errorf("executor %q: %w", cfg.AppID, err)
	}
	e.reports = rep
	return e, nil
}

// Handle registers h as the handler of task. Call it before Start. It
// panics when task is not a valid task name, h is nil, task already has a
// handler or the executor has started: all programming errors.
func (e *Executor) Handle(task string, h Handler) {
	if err := fairway.CheckName("task", task); err != nil {
		panic(fmt.Sprintf("executor.Handle: %v", err))
	}
	if h == nil {
		panic(fmt.Sprintf("executor.Handle: nil handler for task %q", task))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != stateNew || e.stopping {
		panic(fmt.Sprintf("executor.Handle: task %q registered after Start", task))
	}
	if _, dup := e.handlers[task]; dup {
		panic(fmt.Sprintf("executor.Handle: task %q already has a handler", task))
	}
	e.handlers[task] = h
}

// Start registers the executor with a coordinator, subscribes to its
// commands and starts asking for work. It waits for a coordinator to
// answer, retrying every second, until ctx ends; it returns the
// coordinator's refusal (a second executor with the same app id) as an
// error. ctx bounds only the start: the executor runs until Shutdown, and
// its handlers' contexts carry ctx's values.
func (e *Executor) Start(ctx context.Context) error {
	e.startMu.Lock()
	defer e.startMu.Unlock()
	e.mu.Lock()
	switch {
	case e.stopping:
		e.mu.Unlock()
		return fmt.Errorf("executor %q: Start after Shutdown", e.cfg.AppID)
	case e.state != stateNew:
		e.mu.Unlock()
		return fmt.Errorf("executor %q: already started", e.cfg.AppID)
	case len(e.handlers) == 0:
		e.mu.Unlock()
		return fmt.Errorf("executor %q: no handlers: call Handle before Start", e.cfg.AppID)
	}
	e.state = stateStarting
	e.instance = uuid.NewString()
	e.tasks = make([]string, 0, len(e.handlers))
	for task := range e.handlers {
		e.tasks = append(e.tasks, task)
	}
	sort.Strings(e.tasks)
	e.started = time.Now().UTC()
	e.mu.Unlock()

	if err := e.start(ctx); err != nil {
		e.mu.Lock()
		e.state = stateNew
		e.mu.Unlock()
		return err
	}
	return nil
}

func (e *Executor) start(ctx context.Context) error {
	regCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-e.stopCh:
			cancel(errShutdown)
		case <-regCtx.Done():
		}
	}()
	if err := e.register(regCtx); err != nil {
		return err
	}

	subscribe := []struct {
		subject string
		handle  nats.MsgHandler
	}{
		{e.subjects.Cancel(e.cfg.AppID), e.onCancel},
		{e.subjects.Ping(e.cfg.AppID), e.onPing},
		{e.subjects.NotifyWork(), func(*nats.Msg) { e.signal() }},
	}
	subs := make([]*nats.Subscription, 0, len(subscribe))
	unsubscribe := func() {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
	}
	for _, s := range subscribe {
		sub, err := e.nc.Subscribe(s.subject, s.handle)
		if err != nil {
			unsubscribe()
			return fmt.Errorf("executor %q: subscribing to %s: %w", e.cfg.AppID, s.subject, err)
		}
		subs = append(subs, sub)
	}
	// Make sure the server has the subscriptions before any job arrives,
	// so that no cancel command for it can be missed.
	if err := e.nc.FlushTimeout(registerTimeout); err != nil {
		unsubscribe()
		return fmt.Errorf("executor %q: subscribing: %w", e.cfg.AppID, err)
	}

	e.mu.Lock()
	if e.stopping {
		e.mu.Unlock()
		unsubscribe()
		return fmt.Errorf("executor %q: shut down while starting", e.cfg.AppID)
	}
	e.state = stateRunning
	e.subs = subs
	e.baseCtx = context.WithoutCancel(ctx)
	e.mu.Unlock()

	e.bgWG.Add(3)
	go e.heartbeatLoop()
	go e.flushLoop()
	go func() {
		defer e.bgWG.Done()
		e.reports.run(e.bgStop)
	}()
	go e.dispatchLoop()
	e.logger.Info("executor started", "instance", e.instance, "pool_size", e.cfg.PoolSize, "tasks", e.tasks)
	return nil
}

// register announces the executor, retrying while no coordinator answers.
func (e *Executor) register(ctx context.Context) error {
	subject := e.subjects.Exec(e.cfg.AppID, events.ExecRegister)
	data, err := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{
		AppID:    e.cfg.AppID,
		Instance: e.instance,
		Host:     e.cfg.Host,
		Slots:    e.cfg.PoolSize,
		Tasks:    e.tasks,
		Started:  e.started,
	}})
	if err != nil {
		return fmt.Errorf("executor %q: encoding the registration: %w", e.cfg.AppID, err)
	}
	var loggedAt time.Time
	for {
		reqCtx, cancel := context.WithTimeout(ctx, registerTimeout)
		msg, err := e.nc.RequestWithContext(reqCtx, subject, data)
		cancel()
		if err == nil {
			var reply events.Reply
			if err := json.Unmarshal(msg.Data, &reply); err != nil {
				return fmt.Errorf("executor %q: decoding the reply on %s: %w", e.cfg.AppID, subject, err)
			}
			if reply.Error != nil {
				return fmt.Errorf("executor %q: %w", e.cfg.AppID, reply.Error)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("executor %q: no coordinator answered on %s: %w", e.cfg.AppID, subject, context.Cause(ctx))
		}
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("executor %q: registering on %s: %w", e.cfg.AppID, subject, err)
		}
		if time.Since(loggedAt) >= 30*time.Second {
			e.logger.Info("waiting for a coordinator", "subject", subject, "error", err)
			loggedAt = time.Now()
		}
		t := time.NewTimer(registerRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("executor %q: no coordinator answered on %s: %w", e.cfg.AppID, subject, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// Running returns how many jobs the executor holds: running, or finished
// but not yet reported.
func (e *Executor) Running() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.jobs)
}

// Shutdown stops the executor gracefully: it stops taking jobs and waits
// for the running ones to finish. If ctx ends first, it cancels the running
// jobs' contexts, reports them released (the coordinator hands them out
// again) and returns ctx's error (its cause, when it has one); a handler
// that has not returned 5 s after its context was cancelled is reported
// released anyway, and its outcome is dropped. Jobs in a dispatch reply
// that arrives while stopping are released at once. Shutdown returns once
// every report has been acknowledged by JetStream (waiting at most 5 s for
// that). It is safe to call more than once and concurrently; a later call
// whose ctx ends sooner releases the jobs sooner.
func (e *Executor) Shutdown(ctx context.Context) error {
	e.shutdownOnce.Do(func() {
		e.mu.Lock()
		e.stopping = true
		e.mu.Unlock()
		close(e.stopCh)
		go e.shutdown()
	})
	select {
	case <-e.done:
		return e.shutdownErr
	case <-ctx.Done():
	}
	e.force(context.Cause(ctx))
	<-e.done
	return e.shutdownErr
}

// Stop shuts the executor down at once: running jobs are cancelled and
// reported released. It is Shutdown with an expired context.
func (e *Executor) Stop() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = e.Shutdown(ctx)
}

// force cancels the running jobs because a Shutdown's context ended.
func (e *Executor) force(cause error) {
	e.forceOnce.Do(func() {
		e.mu.Lock()
		e.forced = true
		e.forceErr = cause
		e.forcedJobs = len(e.jobs)
		for _, rj := range e.jobs {
			rj.cancel(errShutdown)
		}
		e.mu.Unlock()
		close(e.forceCh)
	})
}

func (e *Executor) shutdown() {
	defer close(e.done)
	// Wait for a Start in progress: it gives up once stopCh is closed.
	e.startMu.Lock()
	defer e.startMu.Unlock()
	e.mu.Lock()
	wasRunning := e.state == stateRunning
	e.state = stateStopped
	held := len(e.jobs)
	e.mu.Unlock()
	if !wasRunning {
		return
	}
	e.logger.Info("executor shutting down", "running", held)

	// The dispatch loop finishes its request in flight (at most 5 s): jobs
	// in its reply are released at once, so no claimed job is lost.
	<-e.dispatchDone
	jobsDone := make(chan struct{})
	go func() {
		e.jobsWG.Wait()
		close(jobsDone)
	}()
	select {
	case <-jobsDone:
	case <-e.forceCh:
		t := time.NewTimer(releaseGrace)
		select {
		case <-jobsDone:
			t.Stop()
		case <-t.C:
			e.releaseStragglers()
		}
	}

	close(e.bgStop) // the flusher sends what is left
	e.bgWG.Wait()
	e.mu.Lock()
	subs := e.subs
	e.subs = nil
	forced, forceErr, forcedJobs := e.forced, e.forceErr, e.forcedJobs
	e.mu.Unlock()
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}

	var errs []error
	if forced && forcedJobs > 0 {
		errs = append(errs, fmt.Errorf("executor %q: %w (%d): %w", e.cfg.AppID, ErrJobsReleased, forcedJobs, forceErr))
	}
	if err := e.reports.flush(reportFlushTimeout); err != nil {
		errs = append(errs, fmt.Errorf("executor %q: %w", e.cfg.AppID, err))
	}
	e.shutdownErr = errors.Join(errs...)
	e.logger.Info("executor stopped")
}

// releaseStragglers reports the jobs whose handlers ignored their cancelled
// context as released, so that Shutdown ends. Their outcome, if they ever
// return, is dropped.
func (e *Executor) releaseStragglers() {
	e.mu.Lock()
	stragglers := make([]*runningJob, 0, len(e.jobs))
	for _, rj := range e.jobs {
		stragglers = append(stragglers, rj)
	}
	e.mu.Unlock()
	for _, rj := range stragglers {
		rj.logger.Error("handler did not return after its context was cancelled; reporting the job released anyway", "grace", releaseGrace)
		e.complete(rj, outcome{kind: events.OutcomeReleased, err: "executor shut down: the handler did not return in time"})
	}
}

// signal wakes the dispatch loop.
func (e *Executor) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// onPing answers with the instance id. A ping that names an instance is
// answered only by that instance: while a replaced instance of the same
// app-id still runs, its answer must not make a coordinator think the
// other one is alive, or dead.
func (e *Executor) onPing(msg *nats.Msg) {
	if msg.Reply == "" || (len(msg.Data) > 0 && string(msg.Data) != e.instance) {
		return
	}
	_ = msg.Respond([]byte(e.instance))
}

// onCancel cancels the attempt a command names. The command must name the
// group, the job and the attempt: a command for another attempt than the
// one held changes nothing (there is no "whatever attempt is held"), and
// one for a job not held yet is remembered for that exact attempt, which
// a dispatch reply may be bringing.
func (e *Executor) onCancel(msg *nats.Msg) {
	var cmd events.CancelCommand
	err := json.Unmarshal(msg.Data, &cmd)
	if err == nil {
		err = checkCancel(cmd)
	}
	if err != nil {
		e.logger.Warn("ignoring a cancel command", "subject", msg.Subject, "error", err)
		if msg.Reply != "" {
			reply, _ := json.Marshal(events.Reply{Error: fairway.AsError(err)})
			_ = msg.Respond(reply)
		}
		return
	}
	ref := fairway.JobRef{Group: cmd.Group, ID: cmd.JobID}
	e.mu.Lock()
	rj, held := e.jobs[ref]
	cancel := held && cmd.Attempt == rj.job.Attempt
	switch {
	case cancel:
		rj.cancel(errCancelRequested)
	case !held:
		e.cancels.add(ref, cmd.Attempt, time.Now())
	}
	e.mu.Unlock()
	switch {
	case cancel:
		rj.logger.Info("cancelling job")
	case held:
		rj.logger.Warn("ignoring a cancel command for another attempt than the one held", "command_attempt", cmd.Attempt)
	default:
		e.logger.Debug("cancel for a job not held yet: remembered", "group", cmd.Group, "job_id", cmd.JobID, "attempt", cmd.Attempt)
	}
	if msg.Reply != "" {
		_ = msg.Respond([]byte("{}"))
	}
}

func (e *Executor) heartbeatLoop() {
	defer e.bgWG.Done()
	t := time.NewTicker(e.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-e.bgStop:
			return
		case <-t.C:
			e.heartbeat()
		}
	}
}

func (e *Executor) heartbeat() {
	e.mu.Lock()
	ids := make([]fairway.JobRef, 0, len(e.jobs))
	for id := range e.jobs {
		ids = append(ids, id)
	}
	e.mu.Unlock()
	slices.SortFunc(ids, compareRefs)
	data, err := json.Marshal(events.Heartbeat{Executor: e.cfg.AppID, Instance: e.instance, Jobs: ids, Slots: e.cfg.PoolSize})
	if err == nil {
		err = e.nc.Publish(e.subjects.Exec(e.cfg.AppID, events.ExecHeartbeat), data)
	}
	if err != nil {
		e.logger.Warn("sending a heartbeat", "error", err)
	}
}

// dispatchLoop asks for jobs while there are free slots and work to get.
func (e *Executor) dispatchLoop() {
	defer close(e.dispatchDone)
	ticker := time.NewTicker(e.cfg.WakeupPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-e.stopCh:
			return
		default:
		}
		idle := true
		if free := e.free(); free > 0 {
			asked := time.Now()
			got, err := e.dispatch(free)
			switch {
			case err == nil:
				// A long poll that ran its course found nothing: ask again at
				// once. An empty answer that came quickly means the
				// coordinator does not hold requests: wait for a wakeup.
				idle = got == 0 && time.Since(asked) < longPoll/2
			case errors.Is(err, fairway.ErrNotRegistered):
				if !e.registerAgain() {
					return
				}
				continue
			case errors.Is(err, nats.ErrNoResponders):
				if time.Since(e.noCoordinatorAt) >= noCoordinatorLog {
					e.logger.Warn("no coordinator answered a dispatch request; waiting for a wakeup", "subject", e.subjects.Exec(e.cfg.AppID, events.ExecDispatch))
					e.noCoordinatorAt = time.Now()
				}
			default:
				e.logger.Warn("asking for jobs", "subject", e.subjects.Exec(e.cfg.AppID, events.ExecDispatch), "error", err)
				t := time.NewTimer(dispatchBackoff)
				select {
				case <-e.stopCh:
					t.Stop()
					return
				case <-t.C:
				}
				continue
			}
		}
		if !idle {
			continue
		}
		select {
		case <-e.stopCh:
			return
		case <-e.wake:
		case <-ticker.C:
		}
	}
}

// registerAgain registers this instance again after a coordinator said it
// does not know it: the database was restored, or the executor was taken
// for dead and another instance took its app-id over. A refusal (that other
// instance runs) is logged, and tried again after a wakeup period. It
// returns false when the executor stops meanwhile.
func (e *Executor) registerAgain() bool {
	// Told again soon after registering again: the coordinators disagree
	// (say, one on a restored database). Do not hammer them.
	if since := time.Since(e.registeredAgainAt); since < e.cfg.WakeupPeriod {
		t := time.NewTimer(e.cfg.WakeupPeriod - since)
		select {
		case <-e.stopCh:
			t.Stop()
			return false
		case <-t.C:
		}
	}
	e.registeredAgainAt = time.Now()
	e.logger.Warn("the coordinators do not know this executor instance (database restored, or its app-id taken over); registering again",
		"instance", e.instance)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := e.register(ctx)
	if err == nil {
		e.logger.Info("executor registered again", "instance", e.instance)
		return true
	}
	if ctx.Err() == nil {
		e.logger.Error("registering again failed; no jobs until it succeeds", "error", err, "retry_in", e.cfg.WakeupPeriod)
	}
	t := time.NewTimer(e.cfg.WakeupPeriod)
	defer t.Stop()
	select {
	case <-e.stopCh:
		return false
	case <-t.C:
		return true
	}
}

func (e *Executor) free() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopping {
		return 0
	}
	return e.cfg.PoolSize - len(e.jobs)
}

// dispatch asks for up to free jobs and starts them; it returns how many
// it got.
func (e *Executor) dispatch(free int) (int, error) {
	if e.dispatchID == "" {
		e.dispatchID = uuid.NewString()
	}
	data, err := json.Marshal(events.DispatchRequest{Executor: e.cfg.AppID, Instance: e.instance, Slots: free, Tasks: e.tasks,
		WaitMS: int(longPoll / time.Millisecond), RequestID: e.dispatchID})
	if err != nil {
		return 0, err
	}
	// Not cancelled by Shutdown: a reply carries jobs already claimed for
	// this executor, which must be reported on.
	ctx, cancel := context.WithTimeout(context.Background(), dispatchTimeout)
	defer cancel()
	msg, err := e.nc.RequestWithContext(ctx, e.subjects.Exec(e.cfg.AppID, events.ExecDispatch), data)
	// Until a reply hands out jobs (or says there are none), a coordinator
	// may have claimed jobs whose answer never came, or came unreadable:
	// the next request goes out under the same id, and gets them. Reusing
	// the id of a claim that failed costs nothing.
	if err != nil {
		return 0, err
	}
	var reply events.DispatchReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return 0, fmt.Errorf("decoding the dispatch reply: %w", err)
	}
	if reply.Error != nil {
		return 0, reply.Error
	}
	e.dispatchID = ""
	if !e.noCoordinatorAt.IsZero() {
		e.logger.Info("a coordinator answers again")
		e.noCoordinatorAt = time.Time{}
	}
	e.accept(reply.Jobs)
	return len(reply.Jobs), nil
}

// accept takes the jobs of a dispatch reply and starts a goroutine for
// each: to run it, or to report it at once (cancelled before it arrived,
// or released because the executor is stopping or full).
func (e *Executor) accept(jobs []fairway.Job) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, fj := range jobs {
		if _, dup := e.jobs[fj.Ref()]; dup {
			e.logger.Warn("dispatch handed out a job this executor already holds; ignoring it", "job_id", fj.ID, "attempt", fj.Attempt)
			continue
		}
		mode := modeRun
		switch {
		case e.stopping:
			mode = modeRelease
		case len(e.jobs) >= e.cfg.PoolSize:
			e.logger.Warn("dispatch handed out more jobs than slots were asked for; releasing the extra job", "job_id", fj.ID)
			mode = modeRelease
		case e.cancels.take(fj.Ref(), fj.Attempt, time.Now()):
			mode = modeCancelled
		}
		rj := e.newRunningJob(fj)
		e.jobs[fj.Ref()] = rj
		e.jobsWG.Add(1)
		go e.run(rj, mode)
	}
}

// cancelMemo remembers cancel commands for jobs not held yet, each for the
// attempt it names, for ttl, at most max of them; every entry lives equally
// long, so the queue is in expiry order.
type cancelMemo struct {
	ttl   time.Duration
	max   int
	byID  map[fairway.JobRef]cancelEntry
	queue []cancelEntry
}

type cancelEntry struct {
	id      fairway.JobRef
	attempt int
	at      time.Time
}

func (m *cancelMemo) add(id fairway.JobRef, attempt int, now time.Time) {
	if m.byID == nil {
		m.byID = make(map[fairway.JobRef]cancelEntry)
	}
	for len(m.queue) > 0 && (len(m.queue) >= m.max || now.Sub(m.queue[0].at) > m.ttl) {
		m.pop()
	}
	entry := cancelEntry{id: id, attempt: attempt, at: now}
	m.byID[id] = entry
	m.queue = append(m.queue, entry)
}

func (m *cancelMemo) pop() {
	old := m.queue[0]
	m.queue[0] = cancelEntry{}
	m.queue = m.queue[1:]
	if cur, ok := m.byID[old.id]; ok && cur == old {
		delete(m.byID, old.id)
	}
}

// take reports whether a cancel for exactly this job attempt is
// remembered, and forgets it.
func (m *cancelMemo) take(id fairway.JobRef, attempt int, now time.Time) bool {
	entry, ok := m.byID[id]
	if !ok || now.Sub(entry.at) > m.ttl || entry.attempt != attempt {
		return false
	}
	delete(m.byID, id)
	return true
}

// checkCancel refuses a cancel command that does not name one attempt of
// one job: attempts count from 1, and 0 names none.
func checkCancel(cmd events.CancelCommand) error {
	switch {
	case cmd.Group == "":
		return fairway.Invalid("group", "a cancel command needs the job's group")
	case cmd.JobID == "":
		return fairway.Invalid("job_id", "a cancel command needs a job_id")
	case cmd.Attempt < 1:
		return fairway.Invalid("attempt", "a cancel command needs the attempt to cancel (from 1), not %d", cmd.Attempt)
	}
	return nil
}
