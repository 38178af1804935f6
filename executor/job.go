package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// resultHeadroom is the room a done report needs beside its result.
const resultHeadroom = 64 << 10

// Job is the job a handler runs: the stored job, a logger whose lines
// become the job's log, and ways to report progress and a result.
type Job struct {
	fairway.Job

	// Logger writes the job's log: each record becomes a fairway.LogLine
	// (message, then attributes as key=value) that the coordinators store
	// with the job. Records also go to the executor's logger at debug
	// level, with job_id. Lines logged faster than they can be sent are
	// dropped once the executor's log buffer is full, and the job's log
	// says how many.
	Logger *slog.Logger

	exec     *Executor
	finished atomic.Bool // reported done: later progress and lines are dropped

	mu       sync.Mutex
	result   json.RawMessage
	progress int   // last value passed to SetProgress, -1 before
	total    int64 // SetTotal's units of work, 0 without
	done     int64 // units Advance counted
}

// SetProgress reports how far the job is, in percent; values outside
// 0..100 are clamped. Reports are coalesced: the coordinators see a job's
// latest value at most once a second (and its last one before its end),
// store it, and publish it on <prefix>.progress.<group>.<task> with an
// estimated end.
func (j *Job) SetProgress(pct int) {
	pct = min(max(pct, 0), 100)
	j.mu.Lock()
	changed := pct != j.progress
	j.progress = pct
	j.mu.Unlock()
	if changed && !j.finished.Load() {
		j.exec.logs.setProgress(j.Ref(), j.Attempt, pct)
	}
}

// SetTotal says how many units of work the job has (pages, rows, files):
// from then on Advance reports progress as the share of them done. The
// coordinators derive an estimated end from the start and the progress.
func (j *Job) SetTotal(n int64) {
	j.mu.Lock()
	j.total, j.done = max(n, 0), 0
	j.mu.Unlock()
	j.SetProgress(0)
}

// Advance counts k more units of work done (see SetTotal) and reports the
// progress, at most 100. Without a total it does nothing.
func (j *Job) Advance(k int64) {
	j.mu.Lock()
	if j.total <= 0 {
		j.mu.Unlock()
		return
	}
	j.done = min(j.done+max(k, 0), j.total)
	pct := int(j.done * 100 / j.total)
	j.mu.Unlock()
	j.SetProgress(pct)
}

// SetResult stores v, encoded as JSON, as the job's result if the handler
// succeeds. A later call replaces an earlier one. It fails when v cannot
// be encoded or is too large for one NATS message.
func (j *Job) SetResult(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding the result of job %s: %w", j.ID, err)
	}
	if limit := j.exec.nc.MaxPayload() - resultHeadroom; limit > 0 && int64(len(data)) > limit {
		return fmt.Errorf("the result of job %s is %d bytes: more than the %d bytes a report can carry (NATS max payload %d bytes)",
			j.ID, len(data), limit, j.exec.nc.MaxPayload())
	}
	if len(data) > events.MaxResultSize {
		return fairway.Permanent(fmt.Errorf("the result of job %s is %d bytes: a result is at most %d bytes (1 MiB); store a large output elsewhere (object storage, a table) and return where it is",
			j.ID, len(data), events.MaxResultSize))
	}
	j.mu.Lock()
	j.result = data
	j.mu.Unlock()
	return nil
}

// Bind decodes the job's args into v, as json.Unmarshal does. Its error is
// permanent (see fairway.Permanent): running the job again cannot fix its
// args, so a handler can return it as is.
func (j *Job) Bind(v any) error {
	if err := json.Unmarshal(j.Args, v); err != nil {
		return fairway.Permanent(fmt.Errorf("decoding the args of job %s (task %s): %w", j.ID, j.Task, err))
	}
	return nil
}

// runningJob is a job the executor holds, from dispatch to its done report.
type runningJob struct {
	job      *Job
	ctx      context.Context
	cancel   context.CancelCauseFunc
	logger   *slog.Logger  // the executor's logger with the job's keys
	reported atomic.Bool   // the done report has been sent
	timeout  time.Duration // how long an attempt may run; 0: no bound
	handler  Handler       // its task's handler, wrapped, when it was accepted
	// releaseReason is the error of its release report when a dispatch
	// reply handed it over only to be released (modeRelease).
	releaseReason string
	// heldFor is how long it may wait for a slot when held beyond the
	// pool (heldWait), set as it starts waiting.
	heldFor time.Duration
	// startedNS is when the handler started (Unix ns; 0: not started);
	// startReport says whether its start was reported on its own
	// (startSent), goes with the done report (startFolded), or neither yet
	// (startPending: not started, or started less than startReportDelay
	// ago).
	startedNS   atomic.Int64
	startReport atomic.Int32
	// gate is closed when a job waiting for a slot may run; holdsSlot says
	// it holds one of the pool's slots (both under the executor's mu).
	gate      chan struct{}
	holdsSlot bool
	// leaving marks the job's goroutine done in jobsWG once: when run
	// returns, or when its handler is abandoned after its timeout (so a
	// graceful shutdown does not wait for a handler that ignores its
	// context).
	leaving sync.Once
}

// startReportDelay is how long a job runs before its start is reported on
// its own: a job that ends sooner reports its start with its end.
const startReportDelay = 25 * time.Millisecond

// States of a job's start report (runningJob.startReport).
const (
	startPending int32 = iota
	startSent
	startFolded
)

// Ways to treat a job that a dispatch reply handed over.
type runMode int

const (
	modeRun       runMode = iota
	modeCancelled         // a cancel command came before the job
	modeRelease           // the executor is stopping, or full
)

// releasedUnrun is the error of a job an executor held and released
// without running it, as it stops.
const releasedUnrun = "released before it started: the executor is shutting down"

// outcome is how a job ended, for its done report.
type outcome struct {
	kind   fairway.Outcome
	err    string
	result json.RawMessage
	snooze time.Duration // with kind snoozed
}

// newRunningJob prepares fj to run. Called with e.mu held.
func (e *Executor) newRunningJob(fj fairway.Job) *runningJob {
	logger := withLazyAttrs(e.logger.Handler(), slog.String("job_id", fj.ID), slog.String("task", fj.Task), slog.String("group", fj.Group),
		slog.Int("attempt", fj.Attempt))
	job := &Job{Job: fj, exec: e, progress: -1}
	job.Logger = slog.New(&jobLogHandler{job: job, fwd: logger.Handler()})
	ctx, cancel := context.WithCancelCause(e.baseCtx)
	return &runningJob{job: job, ctx: ctx, cancel: cancel, logger: logger}
}

// run runs a job accepted from a dispatch reply and reports its outcome.
func (e *Executor) run(rj *runningJob, mode runMode) {
	defer rj.leaving.Do(e.jobsWG.Done)
	job := rj.job
	switch mode {
	case modeRelease:
		e.complete(rj, outcome{kind: events.OutcomeReleased, err: rj.releaseReason})
		return
	case modeCancelled:
		rj.logger.Info("job cancelled before it arrived; not running it")
		e.complete(rj, outcome{kind: events.OutcomeCancelled, err: "cancelled before it started"})
		return
	}
	h := rj.handler
	if h == nil {
		msg := fmt.Sprintf("no handler for task %q on executor %q", job.Task, e.cfg.AppID)
		rj.logger.Error(msg)
		e.complete(rj, outcome{kind: events.OutcomePermanent, err: msg})
		return
	}
	if !e.waitForSlot(rj) || rj.ctx.Err() != nil { // cancelled or released before it ran
		out := e.outcome(rj, rj.ctx.Err(), nil)
		switch {
		case out.kind == events.OutcomeCancelled:
			out.err = "cancelled before it started"
		case errors.Is(context.Cause(rj.ctx), errShutdown):
			out.err = releasedUnrun
		}
		e.complete(rj, out)
		return
	}

	// The start is reported on its own only if the job still runs after
	// startReportDelay; a shorter job's start goes with its end (see
	// complete): one report and one write of the job instead of two.
	start := time.Now()
	rj.startedNS.Store(start.UnixNano())
	startReport := time.AfterFunc(startReportDelay, func() {
		e.pubMu.Lock()
		defer e.pubMu.Unlock()
		if rj.startReport.CompareAndSwap(startPending, startSent) {
			e.reports.publish(e.report(events.ReportStarted, job.Ref(), job.Attempt, events.Report{Time: start.UTC()}))
		}
	})
	defer startReport.Stop()
	rj.logger.Debug("job started")
	if rj.timeout = e.timeout(job); rj.timeout > 0 {
		deadline := time.AfterFunc(rj.timeout, func() { rj.cancel(errTimeout) })
		defer deadline.Stop()
		// A handler that ignores its context is not waited for: its
		// attempt fails after the grace, its slot is freed and its lease
		// no longer renewed; what it returns later is dropped.
		abandon := time.AfterFunc(rj.timeout+e.cfg.TimeoutGrace, func() {
			rj.logger.Error("handler still running after its timeout and the grace; reporting the attempt failed and freeing its slot",
				"timeout", rj.timeout, "grace", e.cfg.TimeoutGrace)
			e.complete(rj, timeoutOutcome(rj.timeout))
			rj.leaving.Do(e.jobsWG.Done)
		})
		defer abandon.Stop()
	}
	e.metrics.started(job.Job, start)
	ctx, span := e.runSpan(rj.ctx, job)
	panicked, err := e.call(ctx, rj, h)
	e.observeRun(time.Since(start))
	out := e.outcome(rj, err, panicked)
	endRunSpan(span, out)
	e.metrics.finished(job.Task, out.kind, time.Since(start)) // before the report: an event of the end finds it counted
	e.complete(rj, out)
	if out.err == "" {
		rj.logger.Info("job finished", "outcome", out.kind, "duration", time.Since(start))
	} else {
		level := slog.LevelInfo
		if out.kind == events.OutcomeError || out.kind == events.OutcomePermanent {
			level = slog.LevelWarn
		}
		rj.logger.Log(context.Background(), level, "job finished", "outcome", out.kind, "duration", time.Since(start), "error", out.err)
	}
}

// timeout is how long an attempt of job may run: the job's own timeout,
// else the task's in Config.Timeouts; 0 for no bound.
func (e *Executor) timeout(job *Job) time.Duration {
	if job.Timeout != "" {
		if d, err := time.ParseDuration(job.Timeout); err == nil && d > 0 {
			return d
		}
	}
	return e.cfg.Timeouts[job.Task]
}

// snoozeText is a snooze delay as a report carries it ("" for none).
func snoozeText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}

// timeoutOutcome is the failure of an attempt that ran out of time.
func timeoutOutcome(d time.Duration) outcome {
	return outcome{kind: events.OutcomeError, err: fmt.Sprintf("timeout: the attempt ran longer than %s", d)}
}

// call runs the handler with ctx (the job's, carrying its run span),
// turning a panic into an error and a log line with the stack.
func (e *Executor) call(ctx context.Context, rj *runningJob, h Handler) (panicked any, err error) {
	defer func() {
		if v := recover(); v != nil {
			panicked = v
			stack := debug.Stack()
			rj.logger.Error("job handler panicked", "panic", fmt.Sprint(v))
			e.logs.add(fairway.LogLine{Group: rj.job.Group, JobID: rj.job.ID, Attempt: rj.job.Attempt, Time: time.Now().UTC(), Level: "error",
				Message: truncate(fmt.Sprintf("panic: %v\n%s", v, stack))})
		}
	}()
	return nil, h(ctx, rj.job)
}

// outcome maps a handler's return to the job's outcome.
func (e *Executor) outcome(rj *runningJob, err error, panicked any) outcome {
	cause := context.Cause(rj.ctx)
	var perm *fairway.PermanentError
	var snooze *fairway.SnoozeError
	switch {
	case errors.Is(cause, errCancelRequested):
		return outcome{kind: events.OutcomeCancelled, err: "cancelled while running"}
	case errors.Is(cause, errShutdown):
		return outcome{kind: events.OutcomeReleased, err: "released while it ran: the executor shut down before the job finished"}
	case errors.Is(cause, errHeldTooLong):
		return outcome{kind: events.OutcomeReleased, err: fmt.Sprintf(
			"released before it started: no slot of this executor freed within %s (its running jobs run long); back to waiting for another executor", rj.heldFor)}
	case errors.Is(cause, errPaused):
		return outcome{kind: events.OutcomeReleased, err: "task paused on this executor before the job started"}
	case panicked != nil:
		return outcome{kind: events.OutcomeError, err: fmt.Sprintf("panic: %v", panicked)}
	case err == nil:
		// A success is one, even past the deadline: its work is done.
		rj.job.mu.Lock()
		result := rj.job.result
		rj.job.mu.Unlock()
		return outcome{kind: events.OutcomeSuccess, result: result}
	case errors.Is(cause, errTimeout):
		return timeoutOutcome(rj.timeout)
	case errors.As(err, &snooze):
		return outcome{kind: events.OutcomeSnoozed, snooze: snooze.Delay}
	case errors.As(err, &perm):
		return outcome{kind: events.OutcomePermanent, err: err.Error()}
	default:
		return outcome{kind: events.OutcomeError, err: err.Error()}
	}
}

// complete sends the job's pending log lines and progress, then its done
// report, and frees its slot. Only the first call for a job does anything.
func (e *Executor) complete(rj *runningJob, out outcome) {
	if !rj.reported.CompareAndSwap(false, true) {
		rj.logger.Warn("job handler returned after the job was released; its outcome is dropped", "outcome", out.kind)
		return
	}
	job := rj.job
	job.finished.Store(true)
	e.pubMu.Lock()
	var started *time.Time
	var ranMS float64
	now := time.Now()
	if ns := rj.startedNS.Load(); ns != 0 {
		ranMS = float64(now.UnixNano()-ns) / float64(time.Millisecond)
		// Folded before the last lines go: they do not send the start on
		// its own (startFirst), the done report carries it.
		if rj.startReport.CompareAndSwap(startPending, startFolded) {
			t := time.Unix(0, ns).UTC()
			started = &t
		}
	}
	e.publishBatch(e.logs.takeJob(job.Ref()))
	e.reports.publish(e.report(events.ReportDone, job.Ref(), job.Attempt, events.Report{
		Time:    now.UTC(),
		Outcome: out.kind,
		Result:  out.result,
		Error:   out.err,
		Snooze:  snoozeText(out.snooze),
		Started: started,
		RanMS:   ranMS,
	}))
	e.pubMu.Unlock()
	rj.cancel(errJobDone)
	e.mu.Lock()
	delete(e.jobs, job.Ref())
	e.ran.add(job.Ref(), job.Attempt, now)
	e.freeSlot(rj)
	e.mu.Unlock()
	e.signal()
}
