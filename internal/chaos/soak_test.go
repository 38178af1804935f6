package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	soakFor   = flag.Duration("chaos.soak", 0, "run TestSoak for this long (task soak: 1h)")
	soakEvery = flag.Duration("chaos.soak-every", time.Minute, "TestSoak: time between faults")
)

// soakFault is one fault the soak picks at random: it leaves the cluster
// whole when it returns.
type soakFault struct {
	name   string
	inject func(ctx context.Context, r *Run) error
}

// soakFaults are the suite's faults that need no cluster of their own (a
// PostgreSQL pair or a tmpfs, which the soak's single PostgreSQL lacks):
// executor and coordinator kills, PostgreSQL and NATS restarts, partitions
// of a coordinator and of an executor, a clock step.
func soakFaults(coordNS, execNS *Netns, clockFile string) []soakFault {
	newExecutors := 0
	return []soakFault{
		{"kill-executor", func(ctx context.Context, r *Run) error {
			victim := pickRunning(r.C.Executors[1:]) // executor-1 stays: it is the partitioned one
			if victim == nil {
				return nil
			}
			r.killExecutor(victim)
			newExecutors++
			_, err := r.C.AddExecutor(fmt.Sprintf("executor-new-%d", newExecutors), 16, 30*time.Second)
			return err
		}},
		{"kill-restart-executor", func(ctx context.Context, r *Run) error {
			victim := pickRunning(r.C.Executors[1:])
			if victim == nil {
				return nil
			}
			r.killExecutor(victim)
			return r.C.RestartExecutor(victim)
		}},
		{"kill-coordinator", func(ctx context.Context, r *Run) error {
			victim := r.C.Coordinators[rand.IntN(len(r.C.Coordinators))]
			r.fault()
			victim.Kill()
			if err := between(ctx, 2*time.Second); err != nil {
				return err
			}
			return victim.Start()
		}},
		{"restart-postgres", func(ctx context.Context, r *Run) error {
			r.fault()
			if err := r.PG.Stop(); err != nil {
				return err
			}
			if err := between(ctx, 2*time.Second); err != nil {
				return err
			}
			return r.PG.Start(ctx)
		}},
		{"restart-nats", func(ctx context.Context, r *Run) error {
			r.fault()
			r.C.NATS[0].Kill()
			if err := between(ctx, time.Second); err != nil {
				return err
			}
			return r.C.RestartNATS(0)
		}},
		{"partition-coordinator", func(ctx context.Context, r *Run) error { return cutFor(ctx, r, coordNS) }},
		{"partition-executor", func(ctx context.Context, r *Run) error {
			// Cut it while it runs a slow job, as the scenario does.
			waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_ = r.C.Trace.waitRunning(waitCtx, r.C.Executors[0].Name, "sleep", 1)
			r.note("executor-1 runs %d jobs when cut", r.C.Trace.running(r.C.Executors[0].Name, ""))
			return cutFor(ctx, r, execNS)
		}},
		{"clock-step", func(ctx context.Context, r *Run) error {
			r.fault()
			return os.WriteFile(clockFile, []byte(fmt.Sprintf("%dh", rand.IntN(3)-1)), 0o644)
		}},
	}
}

func cutFor(ctx context.Context, r *Run, ns *Netns) error {
	r.fault()
	if err := ns.Cut(ctx); err != nil {
		return err
	}
	err := between(ctx, 2*Lease+2*time.Second)
	return errors.Join(err, ns.Heal(context.Background()))
}

func pickRunning(ps []*Proc) *Proc {
	var running []*Proc
	for _, p := range ps {
		if p.Running() {
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		return nil
	}
	return running[rand.IntN(len(running))]
}

// TestSoak runs the cluster for -chaos.soak at half its measured drain
// rate, with a random fault of soakFaults every -chaos.soak-every, then
// does the suite's accounting. `task soak` runs it for an hour.
func TestSoak(t *testing.T) {
	if *soakFor == 0 {
		t.Skip("the soak runs only with -chaos.soak DURATION (task soak runs it for 1h)")
	}
	ctx := t.Context()
	dir, bin, pg := suiteSetup(t, "fairway-soak-")
	dbURL, err := pg.NewDatabase(ctx, "chaos_soak")
	if err != nil {
		t.Fatal(err)
	}
	coordNS, err := NewNetns(ctx, "fwsoak-coord")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(coordNS.Close)
	execNS, err := NewNetns(ctx, "fwsoak-exec")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(execNS.Close)
	clockFile := filepath.Join(dir, "clock-offset")
	if err := os.WriteFile(clockFile, []byte("0s"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := ClusterOptions{NATSNodes: 1, Coordinators: 2, Executors: 3, PoolSize: 16,
		Coordinator: func(i int) ProcOptions {
			if i == 0 {
				return ProcOptions{Netns: coordNS}
			}
			return ProcOptions{Env: []string{clockFileEnv + "=" + clockFile}}
		},
		Executor: func(i int) ProcOptions {
			if i == 0 {
				return ProcOptions{Netns: execNS}
			}
			return ProcOptions{}
		},
	}
	c, err := NewCluster(ctx, bin, filepath.Join(dir, "soak"), dbURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := &Run{C: c, PG: pg, Dir: filepath.Join(dir, "soak")}
	w, nc, err := newWorkload(c.NATSURL(""))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	db, err := c.DBs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()

	// The drain rate: a burst of the workload's mix, submitted at once,
	// until every job is final.
	const burst = 3000
	began := time.Now()
	if err := w.run(ctx, burst, 0); err != nil {
		t.Fatal(err)
	}
	if err := waitFinal(ctx, db, keys(w.submitted())); err != nil {
		t.Fatal(err)
	}
	drain := float64(burst) / time.Since(began).Seconds()
	rate := drain / 2
	t.Logf("drain rate %.0f jobs/s; soaking at %.0f jobs/s for %s, a fault every %s", drain, rate, *soakFor, *soakEvery)

	faults := soakFaults(coordNS, execNS, clockFile)
	workCtx, cancel := context.WithTimeout(ctx, *soakFor+5*time.Minute)
	defer cancel()
	workErr := make(chan error, 1)
	go func() { workErr <- w.run(workCtx, int(rate*soakFor.Seconds()), *soakFor) }()
	var picked []string
	deadline := time.Now().Add(*soakFor)
	for time.Until(deadline) > *soakEvery/2 {
		if err := between(workCtx, min(*soakEvery, time.Until(deadline))); err != nil {
			t.Fatal(err)
		}
		f := faults[rand.IntN(len(faults))]
		picked = append(picked, f.name)
		t.Logf("%s fault %d: %s", time.Now().Format(time.TimeOnly), len(picked), f.name)
		if err := f.inject(workCtx, run); err != nil {
			t.Fatalf("fault %s: %v", f.name, err)
		}
	}
	if err := <-workErr; err != nil {
		t.Fatal(err)
	}
	submitted := w.submitted()
	waitCtx, cancelWait := context.WithTimeout(ctx, 5*time.Minute)
	defer cancelWait()
	if err := waitFinal(waitCtx, db, keys(submitted)); err != nil {
		t.Fatal(err)
	}
	jobs, outbox, err := readJobs(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	readCtx, cancelRead := context.WithTimeout(ctx, 10*time.Minute)
	defer cancelRead()
	evs, err := readEvents(readCtx, c.NATSURL(""))
	if err != nil {
		t.Fatal(err)
	}
	res := Result{Scenario: fmt.Sprintf("soak %s", soakFor.String())}
	account(&res, submitted, jobs, outbox, evs, c.Trace, run.faults)
	res.Duration = time.Since(start)
	t.Log(res)
	t.Logf("faults: %s", strings.Join(picked, ", "))
	for _, n := range run.notes {
		t.Log(n)
	}
	out := *report
	if out == "" {
		out = "soak-report.md"
	}
	text := fmt.Sprintf("Soak: %s at %.0f jobs/s (half the measured drain rate, %.0f jobs/s), a random fault every %s: %s\n\n%s",
		soakFor, rate, drain, soakEvery, strings.Join(picked, ", "), Table([]Result{res}))
	if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
		t.Error(err)
	}
	if !res.OK() {
		t.Fatalf("guarantees broken: %s (logs in %s)", res, run.Dir)
	}
}

func keys(m map[string]kind) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
