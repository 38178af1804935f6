package chaos

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// execution is one run of a job's attempt on an executor, as the
// executor's own log tells it ("job started" … "job finished"). A run cut
// short by SIGKILL ends when the process was killed.
type execution struct {
	executor string
	jobID    string
	attempt  int
	task     string
	start    time.Time
	end      time.Time // zero while it runs
	outcome  string
	killed   bool
}

type runKey struct {
	executor, jobID string
	attempt         int
}

// Trace collects the executions of every executor of a cluster from their
// logs: independent evidence of what ran where and when, not the
// coordinators' bookkeeping.
type Trace struct {
	mu      sync.Mutex
	runs    []*execution
	open    map[runKey]*execution
	started map[string]int // executor -> "executor started" lines
	notify  chan struct{}  // closed and replaced on every change
}

func newTrace() *Trace {
	return &Trace{open: map[runKey]*execution{}, started: map[string]int{}, notify: make(chan struct{})}
}

func (t *Trace) add(executor string, line []byte) {
	l, ok := parseLogLine(line)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	key := runKey{executor, l.JobID, l.Attempt}
	switch l.Msg {
	case "executor started":
		t.started[executor]++
	case "job started":
		e := &execution{executor: executor, jobID: l.JobID, attempt: l.Attempt, task: l.Task, start: l.Time}
		t.runs = append(t.runs, e)
		t.open[key] = e
	case "job finished":
		if e := t.open[key]; e != nil {
			e.end, e.outcome = l.Time, l.Outcome
			delete(t.open, key)
		}
	default:
		return
	}
	close(t.notify)
	t.notify = make(chan struct{})
}

// released says whether an executor said it released attempt of job id
// (its run ended "released": given back without counting).
func (t *Trace) released(id string, attempt int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.ContainsFunc(t.runs, func(e *execution) bool {
		return e.jobID == id && e.attempt == attempt && e.outcome == "released"
	})
}

func (t *Trace) changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.notify
}

// killed ends the open runs of executor at the time it was killed.
func (t *Trace) killed(executor string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.open {
		if k.executor == executor {
			e.end, e.killed = at, true
			delete(t.open, k)
		}
	}
}

func (t *Trace) restarted(string) {}

// registered is the number of executors that have started at least once.
func (t *Trace) registered() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.started)
}

// running is the number of runs of task ("" for any) executor has in
// progress.
func (t *Trace) running(executor, task string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, e := range t.open {
		if k.executor == executor && (task == "" || e.task == task) {
			n++
		}
	}
	return n
}

// outcomes counts the finished runs of executor by outcome.
func (t *Trace) outcomes(executor string) map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for _, e := range t.runs {
		if e.executor == executor && !e.end.IsZero() && !e.killed {
			out[e.outcome]++
		}
	}
	return out
}

// waitFor waits until cond holds, re-checking on every change.
func (t *Trace) waitFor(ctx context.Context, what string, cond func() bool) error {
	for {
		ch := t.changed()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-ch:
		}
	}
}

// startedTimes is how many times executor has logged "executor started".
func (t *Trace) startedTimes(executor string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.started[executor]
}

// waitStarted waits until executor has logged "executor started" n times.
func (t *Trace) waitStarted(ctx context.Context, executor string, n int) error {
	return t.waitFor(ctx, executor+" to start", func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.started[executor] >= n
	})
}

// waitRunning waits until executor runs at least n jobs of task ("" for
// any).
func (t *Trace) waitRunning(ctx context.Context, executor, task string, n int) error {
	return t.waitFor(ctx, fmt.Sprintf("%s to run %d %s jobs", executor, n, task), func() bool { return t.running(executor, task) >= n })
}

// overlapping returns the jobs that two runs executed at the same time,
// and the runs per job.
func (t *Trace) overlapping(now time.Time) (jobs []string, runs map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	byJob := map[string][]*execution{}
	for _, e := range t.runs {
		byJob[e.jobID] = append(byJob[e.jobID], e)
	}
	runs = map[string]int{}
	for id, es := range byJob {
		runs[id] = len(es)
		slices.SortFunc(es, func(a, b *execution) int { return a.start.Compare(b.start) })
		var latestEnd time.Time // of the runs started so far
		for i, e := range es {
			if i > 0 && e.start.Before(latestEnd) {
				jobs = append(jobs, id)
				break
			}
			end := e.end
			if end.IsZero() {
				end = now
			}
			if end.After(latestEnd) {
				latestEnd = end
			}
		}
	}
	return jobs, runs
}
