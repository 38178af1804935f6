// The executor's lifecycle: Start registers it and starts its loops;
// Shutdown drains it; heartbeats keep its leases while it runs.

package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
)

// lifecycle is where an executor is in its life. It only moves forward,
// except that a Start that fails goes back to lifeNew.
type lifecycle int

const (
	lifeNew       lifecycle = iota // handlers may be added; Start may be called
	lifeStarting                   // Start is registering
	lifeRunning                    // taking and running jobs
	lifeDraining                   // Shutdown began: no new jobs, running ones finish
	lifeReleasing                  // Shutdown's context ended: running jobs are cancelled and released
	lifeStopped                    // shut down, or Shutdown before the executor ran
)

// stopping tells whether Shutdown has begun: no new job may run.
func (l lifecycle) stopping() bool { return l >= lifeDraining }

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
	case e.life.stopping():
		e.mu.Unlock()
		return fmt.Errorf("executor %q: Start after Shutdown", e.cfg.AppID)
	case e.life != lifeNew:
		e.mu.Unlock()
		return fmt.Errorf("executor %q: already started", e.cfg.AppID)
	case len(e.handlers) == 0:
		e.mu.Unlock()
		return fmt.Errorf("executor %q: no handlers: call Handle before Start", e.cfg.AppID)
	}
	e.life = lifeStarting
	e.instance = uuid.NewString()
	e.chained = make(map[string]Handler, len(e.handlers))
	for task, h := range e.handlers {
		e.chained[task] = e.chain(h)
	}
	e.setTasks()
	e.started = time.Now().UTC()
	e.mu.Unlock()

	if err := e.start(ctx); err != nil {
		e.mu.Lock()
		if e.life == lifeStarting {
			e.life = lifeNew
		}
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
		{e.subjects.Drain(e.cfg.AppID), e.onDrain},
		{e.subjects.Pause(e.cfg.AppID), e.onPause},
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
	if e.life != lifeStarting {
		e.mu.Unlock()
		unsubscribe()
		return fmt.Errorf("executor %q: shut down while starting", e.cfg.AppID)
	}
	e.life = lifeRunning
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
	e.mu.Lock()
	pool, tasks := e.pool, e.tasks
	e.mu.Unlock()
	e.registered.Store(true)
	e.logger.Info("executor started", "instance", e.instance, "pool_size", pool, "tasks", tasks)
	return nil
}

// Registered says whether Start has succeeded: a coordinator accepted the
// executor's registration (a health check's answer). It stays true once
// it is.
func (e *Executor) Registered() bool { return e.registered.Load() }

// Instance is this run's instance id (a new one at each Start; empty
// before): the id the coordinators, its heartbeats and its reports know
// it by, and what a ping names.
func (e *Executor) Instance() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.instance
}

// register announces the executor, retrying while no coordinator answers.
func (e *Executor) register(ctx context.Context) error {
	subject := e.subjects.Exec(e.cfg.AppID, events.ExecRegister)
	e.mu.Lock()
	data, err := json.Marshal(events.RegisterRequest{Executor: fairway.Executor{
		AppID:    e.cfg.AppID,
		Instance: e.instance,
		Host:     e.cfg.Host,
		Slots:    e.pool,
		Tasks:    e.registeredTasks(),
		Started:  e.started,
	}})
	e.mu.Unlock()
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

// Shutdown stops the executor gracefully: it stops taking jobs (first
// telling the journal's leader that this instance stops, so that nothing
// is handed to it again and what it releases counts no attempt; that
// request waits at most 2 s, whatever ctx) and waits for the running ones
// to finish. If ctx ends first, it cancels the running
// jobs' contexts, reports them released (the coordinator hands them out
// again) and returns ctx's error (its cause, when it has one); a handler
// that has not returned 5 s after its context was cancelled is reported
// released anyway, and its outcome is dropped. Jobs in a dispatch reply
// that arrives while stopping are released at once. Shutdown returns once
// every report has been acknowledged by JetStream (waiting at most 5 s for
// that) and it has deregistered (at most 2 s more; without an answer the
// coordinators mark it gone after a few silent leases). It is safe to call more than once and concurrently; a later call
// whose ctx ends sooner releases the jobs sooner.
func (e *Executor) Shutdown(ctx context.Context) error {
	e.shutdownOnce.Do(func() {
		e.mu.Lock()
		ran := e.life == lifeRunning
		if ran {
			e.life = lifeDraining
		} else {
			e.life = lifeStopped // it never ran: a Start in progress gives up
		}
		e.mu.Unlock()
		close(e.stopCh)
		if ran {
			// Before any job is released: else the leader could hand it
			// straight back to this instance's parked request.
			e.tellStopping()
		}
		// Jobs held beyond the pool never started: back to waiting at once.
		e.releaseQueued(func(*runningJob) bool { return true }, errShutdown)
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
		if e.life == lifeDraining {
			e.life = lifeReleasing
		}
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
	ran := e.life == lifeDraining || e.life == lifeReleasing
	held := len(e.jobs)
	e.mu.Unlock()
	if !ran {
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
	forced, forceErr, forcedJobs := e.life == lifeReleasing, e.forceErr, e.forcedJobs
	e.life = lifeStopped
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
	// Last, once the reports are out: from now on no job waits for this
	// executor, and a submission of a task only it ran gets a warning.
	e.deregister()
	e.shutdownErr = errors.Join(errs...)
	e.logger.Info("executor stopped")
}

// tellStopping tells the journal's leader that this instance stops (a
// dispatch request with Stopping): it answers the instance's parked
// request empty, hands it no job from now on, and the jobs it releases
// count no attempt. Best effort, at most stoppingTimeout: without the
// leader's answer the jobs are released all the same, and one may be
// handed back once, and released again, with an attempt counted.
func (e *Executor) tellStopping() {
	subject := e.subjects.Exec(e.cfg.AppID, events.ExecDispatch)
	err := e.ask(subject, events.DispatchRequest{Executor: e.cfg.AppID, Instance: e.instance, Stopping: true}, stoppingTimeout)
	if err != nil {
		e.logger.Info("could not tell the coordinators that this executor stops; its jobs are released all the same",
			"subject", subject, "error", err)
	}
}

// ask sends a request of the executor protocol whose reply only says
// whether it was refused (an error), and waits for it.
func (e *Executor) ask(subject string, req any, timeout time.Duration) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	msg, err := e.nc.Request(subject, data, timeout)
	if err != nil {
		return err
	}
	var reply struct {
		Error *fairway.Error `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return fmt.Errorf("decoding the reply on %s: %w", subject, err)
	}
	if reply.Error != nil {
		return reply.Error
	}
	return nil
}

// deregister tells the coordinators that this instance shut down. It is
// best effort: an executor that could not say so is marked gone after a
// few leases without a heartbeat.
func (e *Executor) deregister() {
	subject := e.subjects.Exec(e.cfg.AppID, events.ExecDeregister)
	err := e.ask(subject, events.DeregisterRequest{Executor: e.cfg.AppID, Instance: e.instance}, deregisterTimeout)
	if err != nil {
		e.logger.Info("could not deregister; the coordinators mark this executor gone once it has been silent for a few leases",
			"subject", subject, "error", err)
		return
	}
	e.logger.Debug("executor deregistered", "instance", e.instance)
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
	pool := e.pool
	e.mu.Unlock()
	slices.SortFunc(ids, compareRefs)
	data, err := json.Marshal(events.Heartbeat{Executor: e.cfg.AppID, Instance: e.instance, Jobs: ids, Slots: pool})
	if err != nil {
		e.logger.Warn("sending a heartbeat", "error", err)
		return
	}
	// A request, sent again until a coordinator says it recorded it: the
	// coordinators share the subject as a queue group, and one cut off
	// (from PostgreSQL, or from NATS before the server notices) would
	// swallow it, and this executor's jobs would be released as lost
	// while they run. Each try may reach another coordinator.
	subject := e.subjects.Exec(e.cfg.AppID, events.ExecHeartbeat)
	wait := min(e.cfg.Heartbeat/(heartbeatTries+1), time.Second)
	for try := 1; ; try++ {
		_, err = e.nc.Request(subject, data, wait)
		if err == nil || try == heartbeatTries {
			break
		}
	}
	if err != nil {
		e.logger.Debug("no coordinator acknowledged a heartbeat", "tries", heartbeatTries, "error", err)
	}
}

// heartbeatTries bounds the tries of one heartbeat (heartbeat).
const heartbeatTries = 3
