package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
)

// Size scales a run: the short one runs in CI, the long one with `task
// chaos`.
type Size struct {
	Jobs     int           // per scenario
	Duration time.Duration // over which they are submitted
	Repeats  int           // faults per scenario
	Timeout  time.Duration // a scenario that takes longer fails
}

// Short and Long are the two sizes.
var (
	Short = Size{Jobs: 1500, Duration: 8 * time.Second, Repeats: 1, Timeout: 4 * time.Minute}
	Long  = Size{Jobs: 7000, Duration: 60 * time.Second, Repeats: 4, Timeout: 15 * time.Minute}
)

// Scenario is one fault and the cluster it hits.
type Scenario struct {
	Name    string
	Cluster ClusterOptions
	// Inject injects the fault repeats times while the workload runs and
	// returns when the cluster is whole again. It records each fault's
	// time with r.fault.
	Inject func(ctx context.Context, r *Run, repeats int) error
	// Check adds scenario-specific checks after the accounting.
	Check func(r *Run, res Result) error
	// Setup, when set, prepares what the cluster needs before it starts
	// (a PostgreSQL pair, a tmpfs, a network namespace): it may change the
	// cluster's options and return another database URL. What it makes is
	// undone with r.cleanup.
	Setup func(ctx context.Context, r *Run, opts *ClusterOptions, dbURL string) (string, error)
	// Submit, when set, replaces the standard workload: it submits size's
	// jobs and returns the acknowledged ones by job id.
	Submit func(ctx context.Context, r *Run, size Size) (map[string]kind, error)
}

// Run is a scenario in progress.
type Run struct {
	C      *Cluster
	PG     *PG
	Dir    string // the scenario's directory
	faults []time.Time
	notes  []string
	undo   []func()
	state  any // the scenario's own
}

// cleanup undoes what Setup made, last first.
func (r *Run) cleanup() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
}

func (r *Run) fault() { r.faults = append(r.faults, time.Now()) }

func (r *Run) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// killExecutor SIGKILLs an executor and records when.
func (r *Run) killExecutor(p *Proc) {
	r.fault()
	p.Kill()
	r.C.Trace.killed(p.Name, time.Now())
}

// between waits d between faults: the fault's pace, not a synchronisation.
func between(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// outages takes a part of the cluster down repeats times under load, for
// downFor each time, one second apart: stop(i) and start(i) act on the
// part of fault i.
func outages(ctx context.Context, r *Run, repeats int, downFor time.Duration, stop, start func(i int) error) error {
	for i := range repeats {
		if err := between(ctx, time.Second); err != nil {
			return err
		}
		r.fault()
		if err := stop(i); err != nil {
			return err
		}
		if err := between(ctx, downFor); err != nil {
			return err
		}
		if err := start(i); err != nil {
			return err
		}
	}
	return nil
}

// The reasons the stuck event of a job gives when its executor is lost.
const (
	releasedByLease   = "executor lost: its lease expired without a heartbeat"
	releasedByRestart = "executor lost: it restarted"
)

// Scenarios lists the faults of the suite.
func Scenarios() []Scenario {
	return append(append(crashScenarios(), harderScenarios()...), journalScenarios()...)
}

func crashScenarios() []Scenario {
	base := ClusterOptions{NATSNodes: 1, Coordinators: 2, Executors: 3, PoolSize: 16}
	return []Scenario{
		{
			Name: "kill-executor", Cluster: base,
			// SIGKILL an executor in the middle of jobs and never restart it:
			// its jobs run elsewhere once the lease expires. A new executor
			// with a new app-id keeps the capacity for the next fault.
			Inject: func(ctx context.Context, r *Run, repeats int) error {
				for i := range repeats {
					victim := r.C.Executors[i]
					if err := r.C.Trace.waitRunning(ctx, victim.Name, "sleep", 1); err != nil {
						return err
					}
					r.killExecutor(victim)
					if _, err := r.C.AddExecutor(fmt.Sprintf("executor-new-%d", i+1), base.PoolSize, 30*time.Second); err != nil {
						return err
					}
				}
				return nil
			},
			Check: func(_ *Run, res Result) error {
				if res.Releases[releasedByLease] == 0 {
					return fmt.Errorf("no job was released by its lease (releases: %v): were the killed executor's jobs not held?", res.Releases)
				}
				return nil
			},
		},
		{
			Name: "kill-restart-executor", Cluster: base,
			// SIGKILL an executor and restart it at once with the same
			// app-id: its old jobs are released at once, not after the lease.
			Inject: func(ctx context.Context, r *Run, repeats int) error {
				victim := r.C.Executors[0]
				for i := range repeats {
					if err := r.C.Trace.waitRunning(ctx, victim.Name, "sleep", 1); err != nil {
						return err
					}
					r.killExecutor(victim)
					if err := r.C.RestartExecutor(victim); err != nil {
						return err
					}
					if err := r.C.Trace.waitStarted(ctx, victim.Name, i+2); err != nil {
						return err
					}
				}
				return nil
			},
			Check: func(_ *Run, res Result) error {
				// Which mechanism released the jobs, not how long it took: a
				// slow machine stretches every time, never the reason.
				if n := res.Releases[releasedByLease]; n > 0 {
					return fmt.Errorf("%d jobs waited for their lease (%s) to run out, although the only executor killed restarted at once and its old jobs should have been released then (releases: %v)", n, Lease, res.Releases)
				}
				if res.Releases[releasedByRestart] == 0 {
					return fmt.Errorf("no job was released by the executor's restart (releases: %v)", res.Releases)
				}
				return nil
			},
		},
		{
			Name: "kill-coordinator", Cluster: base,
			// SIGKILL one of two coordinators under load; restart it before
			// the next fault, which hits the other one.
			Inject: func(ctx context.Context, r *Run, repeats int) error {
				return outages(ctx, r, repeats, 2*time.Second,
					func(i int) error { r.C.Coordinators[i%2].Kill(); return nil },
					func(i int) error { return r.C.Coordinators[i%2].Start() })
			},
		},
		{
			Name: "restart-postgres", Cluster: base,
			Inject: func(ctx context.Context, r *Run, repeats int) error {
				return outages(ctx, r, repeats, 2*time.Second,
					func(int) error { return r.PG.Stop() },
					func(int) error { return r.PG.Start(ctx) })
			},
		},
		{
			Name: "restart-nats", Cluster: base,
			Inject: func(ctx context.Context, r *Run, repeats int) error {
				return outages(ctx, r, repeats, time.Second,
					func(int) error { r.C.NATS[0].Kill(); return nil },
					func(int) error { return r.C.RestartNATS(0) })
			},
		},
		{
			Name: "kill-nats-node", Cluster: ClusterOptions{NATSNodes: 3, Coordinators: 2, Executors: 3, PoolSize: 16},
			// Kill one node of a three-node JetStream cluster (streams have
			// three replicas); restart it before the next fault, which hits
			// the next node.
			Inject: func(ctx context.Context, r *Run, repeats int) error {
				return outages(ctx, r, repeats, 3*time.Second,
					func(i int) error { r.C.NATS[i%3].Kill(); return nil },
					func(i int) error { return r.C.RestartNATS(i % 3) })
			},
		},
		{
			Name: "drop-notify", Cluster: ClusterOptions{NATSNodes: 1, Coordinators: 2, Executors: 3, PoolSize: 16, DropNotify: true},
			// The coordinators may not publish work notifications at all:
			// executors find work by their wakeup period and long polls.
			Inject: func(context.Context, *Run, int) error { return nil },
		},
		{
			Name: "graceful-shutdown", Cluster: base,
			// executor-1: POST /api/v1/shutdownAndExit in the middle of slow
			// jobs: it finishes them and exits 0. executor-2: SIGTERM, then a
			// second SIGTERM: its running jobs are released, go back to
			// waiting without counting as failed attempts, and run elsewhere.
			Inject: func(ctx context.Context, r *Run, repeats int) error {
				for i := range repeats {
					graceful, forced := r.C.Executors[0], r.C.Executors[1]
					if err := r.C.Trace.waitRunning(ctx, graceful.Name, "sleep", 2); err != nil {
						return err
					}
					r.fault()
					if err := shutdownAndExit(ctx, graceful.HTTPAddr()); err != nil {
						return err
					}
					code, err := releaseByTwoSignals(ctx, r, forced)
					if err != nil {
						return err
					}
					if code != 0 {
						return fmt.Errorf("%s exited with %d, want 0 (log: %s)", forced.Name, code, forced.log)
					}
					code, err = graceful.Wait(time.Minute)
					if err != nil {
						return err
					}
					r.note("%s exit=%d outcomes=%v", graceful.Name, code, r.C.Trace.outcomes(graceful.Name))
					if code != 0 {
						return fmt.Errorf("%s exited with %d, want 0 (log: %s)", graceful.Name, code, graceful.log)
					}
					if i+1 < repeats {
						for _, p := range []*Proc{graceful, forced} {
							started := r.C.Trace.startedTimes(p.Name)
							if err := r.C.RestartExecutor(p); err != nil {
								return err
							}
							if err := r.C.Trace.waitStarted(ctx, p.Name, started+1); err != nil {
								return err
							}
						}
					}
				}
				return nil
			},
			Check: func(r *Run, res Result) error {
				graceful, forced := r.C.Trace.outcomes(r.C.Executors[0].Name), r.C.Trace.outcomes(r.C.Executors[1].Name)
				if graceful["released"] > 0 {
					return fmt.Errorf("the gracefully stopped executor released %d jobs instead of finishing them", graceful["released"])
				}
				if forced["released"] == 0 {
					return fmt.Errorf("the executor stopped by two signals released no job (outcomes %v)", forced)
				}
				if res.Unexpected > 0 {
					return fmt.Errorf("%d jobs ended in an unexpected state: a released job counted as a failed attempt?", res.Unexpected)
				}
				return nil
			},
		},
	}
}

// releaseByTwoSignals stops p with SIGTERM and, 100 ms later, a second
// SIGTERM while it runs a slow job, so that it releases that job; it
// returns p's exit code. A job of 0.3 s may end between the two signals
// (the trace reads the executor's log a little late): then p stopped with
// nothing to release, and it is started again for another try, five at
// most.
func releaseByTwoSignals(ctx context.Context, r *Run, p *Proc) (int, error) {
	const tries = 5
	for try := 1; ; try++ {
		released := r.C.Trace.outcomes(p.Name)["released"]
		if err := r.C.Trace.waitRunning(ctx, p.Name, "sleep", 1); err != nil {
			return 0, err
		}
		r.fault()
		if err := p.Signal(syscall.SIGTERM); err != nil {
			return 0, err
		}
		if err := between(ctx, 100*time.Millisecond); err != nil {
			return 0, err
		}
		if err := p.Signal(syscall.SIGTERM); err != nil {
			return 0, err
		}
		code, err := p.Wait(time.Minute)
		if err != nil {
			return 0, err
		}
		outcomes := r.C.Trace.outcomes(p.Name)
		r.note("%s exit=%d outcomes=%v (try %d)", p.Name, code, outcomes, try)
		if code != 0 || outcomes["released"] > released || try == tries {
			return code, nil
		}
		started := r.C.Trace.startedTimes(p.Name)
		if err := r.C.RestartExecutor(p); err != nil {
			return 0, err
		}
		if err := r.C.Trace.waitStarted(ctx, p.Name, started+1); err != nil {
			return 0, err
		}
	}
}

func shutdownAndExit(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/api/v1/shutdownAndExit", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+executorHTTPToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("shutdownAndExit: %s: %s", resp.Status, body)
	}
	return nil
}

// RunScenario runs one scenario on a fresh database and fresh processes.
func RunScenario(ctx context.Context, bin Binaries, pg *PG, dir string, sc Scenario, size Size) (Result, []string, error) {
	res := Result{Scenario: sc.Name}
	start := time.Now()
	dbURL, err := pg.NewDatabase(ctx, "chaos_"+sanitize(sc.Name))
	if err != nil {
		return res, nil, err
	}
	run := &Run{PG: pg, Dir: filepath.Join(dir, sc.Name)}
	defer run.cleanup()
	opts := sc.Cluster
	if sc.Setup != nil {
		if err := os.MkdirAll(run.Dir, 0o755); err != nil {
			return res, nil, err
		}
		if dbURL, err = sc.Setup(ctx, run, &opts, dbURL); err != nil {
			return res, run.notes, fmt.Errorf("setting up: %w", err)
		}
	}
	c, err := NewCluster(ctx, bin, run.Dir, dbURL, opts)
	if err != nil {
		return res, run.notes, err
	}
	defer c.Close()
	run.C = c
	w, nc, err := newWorkload(c.NATSURL(""))
	if err != nil {
		return res, nil, err
	}
	defer nc.Close()

	// The workload and the faults run side by side, and readers read the
	// jobs in flight until every job is final.
	workCtx, cancel := context.WithTimeout(ctx, size.Duration+5*time.Minute)
	defer cancel()
	rd := &readers{client: w.client, jobs: w.inFlight, start: time.Now()}
	readCtx, stopReads := context.WithCancel(workCtx)
	readsDone := make(chan struct{})
	go func() {
		defer close(readsDone)
		rd.run(readCtx, 2, 20*time.Millisecond)
	}()
	defer func() { stopReads(); <-readsDone }()
	workErr := make(chan error, 1)
	var custom map[string]kind
	go func() {
		if sc.Submit != nil {
			var err error
			custom, err = sc.Submit(workCtx, run, size)
			workErr <- err
			return
		}
		workErr <- w.run(workCtx, size.Jobs, size.Duration)
	}()
	if err := sc.Inject(workCtx, run, size.Repeats); err != nil {
		return res, run.notes, fmt.Errorf("injecting the fault: %w", err)
	}
	if err := <-workErr; err != nil {
		return res, run.notes, err
	}
	submitted := w.submitted()
	if sc.Submit != nil {
		submitted = custom
	}
	ids := make([]string, 0, len(submitted))
	for id := range submitted {
		ids = append(ids, id)
	}
	db, err := c.DBs(ctx)
	if err != nil {
		return res, run.notes, err
	}
	defer db.Close()
	waitCtx, cancelWait := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelWait()
	if err := waitFinal(waitCtx, db, ids); err != nil {
		return res, run.notes, err
	}
	stopReads()
	<-readsDone
	res.NotLinearizable, res.NotLinearizableJob, res.Reads = rd.check(run.C.Trace.released)
	if rd.failed > 0 {
		run.note("%d reads got no answer (outages); they say nothing", rd.failed)
	}
	// Events follow their changes' commits, published at least once by a
	// leader that may still be trying again when the last job ends (a
	// NATS node killed: no ack for 10 s, then the events sent again): the
	// stream is read again, each time events are published after a read
	// that missed some, until every committed change has its event, or
	// for two minutes, after which the missing ones count.
	readCtx, cancelRead := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelRead()
	published := make(chan struct{}, 1)
	evSub, err := nc.Subscribe(events.NewSubjects("").EventsAll(), func(*nats.Msg) {
		select {
		case published <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return res, run.notes, fmt.Errorf("subscribing to the events: %w", err)
	}
	defer func() { _ = evSub.Unsubscribe() }()
	checked := res // what the reads found; account adds the rest
	for again := false; ; again = true {
		jobs, outbox, err := readJobs(ctx, db)
		if err != nil {
			return res, run.notes, err
		}
		evs, err := readEvents(readCtx, c.NATSURL(""))
		if err != nil {
			return res, run.notes, fmt.Errorf("reading the event stream: %w", err)
		}
		res = checked
		account(&res, submitted, jobs, outbox, evs, c.Trace, run.faults)
		if res.WithoutEvent == 0 {
			break
		}
		select {
		case <-readCtx.Done():
		case <-published:
		}
		if readCtx.Err() != nil {
			break
		}
		if !again {
			run.note("%d committed changes without their event yet: reading the stream again until they come", res.WithoutEvent)
		}
	}
	res.Duration = time.Since(start)
	if w.attempts > 0 {
		run.note("submissions retried %d times during the fault (last error: %v)", w.attempts, w.lastErr)
	}
	if !res.OK() {
		return res, run.notes, fmt.Errorf("guarantees broken: %s (logs in %s)", res, c.dir)
	}
	if sc.Check != nil {
		if err := sc.Check(run, res); err != nil {
			return res, run.notes, fmt.Errorf("%w (logs in %s)", err, c.dir)
		}
	}
	return res, run.notes, nil
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if lowerOrDigit := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'; !lowerOrDigit {
			b[i] = '_'
		}
	}
	return string(b)
}
