package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// drain: a backlog of opts.Jobs no-op jobs over 10 groups, submitted at
// once; then the time until all are successful (events received), and
// what the whole (submitting and working, which overlap) cost per job.
func drain(ctx context.Context, opts Options) (*Result, error) {
	s, err := newSystem(ctx, opts, systemConfig{slots: opts.Slots})
	if err != nil {
		return nil, err
	}
	defer s.close()
	submitted, worked, u, err := s.drain(ctx, opts.Jobs)
	if err != nil {
		return nil, err
	}
	r := &Result{Scenario: "drain", Jobs: opts.Jobs}
	r.add("submit_jobs_per_s", float64(opts.Jobs)/submitted.Seconds())
	r.add("work_jobs_per_s", float64(opts.Jobs)/worked.Seconds())
	r.add("slots", opts.Slots)
	r.add(s.rss())
	r.addUsage(u)
	if err := s.addJobsPerServer(ctx, r); err != nil {
		return nil, err
	}
	return r, nil
}

// drain submits n no-op jobs over 10 groups at once and waits until all
// succeeded: how long the submitting and the whole took, and what the
// whole cost.
func (s *system) drain(ctx context.Context, n int) (submitted, worked time.Duration, u usage, err error) {
	subs := s.jobs(n, func(i int) string { return fmt.Sprintf("g%d", i%10) }, 0)
	p, err := s.startPhase(ctx)
	if err != nil {
		return 0, 0, u, err
	}
	start := time.Now()
	if _, err := s.client.SubmitMany(ctx, subs); err != nil {
		return 0, 0, u, err
	}
	submitted = time.Since(start)
	if _, err := s.waitFinished(ctx, n, 10*time.Minute); err != nil {
		return 0, 0, u, err
	}
	worked = time.Since(start)
	u, err = p.stop(ctx, n)
	return submitted, worked, u, err
}

// history: the drain of opts.Jobs on an empty database, on one that keeps
// opts.History finished jobs, and on that one while the coordinator prunes
// them (their retention has passed), in one run; and how many of them the
// coordinator pruned during that drain.
func history(ctx context.Context, opts Options) (*Result, error) {
	r := &Result{Scenario: "history", Jobs: opts.Jobs}
	var rates [3]float64
	var total usage
	for i, cfg := range []systemConfig{{}, {history: opts.History}, {history: opts.History, prune: true}} {
		cfg.slots = opts.Slots
		err := func() error {
			s, err := newSystem(ctx, opts, cfg)
			if err != nil {
				return err
			}
			defer s.close()
			_, worked, u, err := s.drain(ctx, opts.Jobs)
			if err != nil {
				return err
			}
			total.add(u)
			rates[i] = float64(opts.Jobs) / worked.Seconds()
			if cfg.prune {
				left, err := s.store.CountJobsWithPrefix(ctx, store.HistoryPrefix)
				if err != nil {
					return err
				}
				r.add("pruned_during_drain", opts.History-left)
			}
			return nil
		}()
		if err != nil {
			return nil, err
		}
	}
	r.add("history", opts.History)
	r.add("work_jobs_per_s_empty", rates[0])
	r.add("work_jobs_per_s_history", rates[1])
	r.add("work_jobs_per_s_pruning", rates[2])
	r.add("history_ratio", rates[1]/rates[0])
	r.add("pruning_ratio", rates[2]/rates[1])
	r.addUsage(total) // the three drains'
	return r, nil
}

// latency: an idle system, one job at a time; submit-to-start and
// submit-to-success.
func latency(ctx context.Context, opts Options) (*Result, error) {
	s, err := newSystem(ctx, opts, systemConfig{slots: opts.Slots})
	if err != nil {
		return nil, err
	}
	defer s.close()
	const n = 300
	var toStart, toSuccess []time.Duration
	var p *phase
	for i := range n {
		if i == 10 {
			if p, err = s.startPhase(ctx); err != nil {
				return nil, err
			}
		}
		id := fmt.Sprintf("lat-%d", i)
		submitted := time.Now()
		if _, err := s.client.Submit(ctx, fairway.Submission{ID: id, Group: "g", Task: "work"}); err != nil {
			return nil, err
		}
		done, err := s.waitFinished(ctx, 1, time.Minute)
		if err != nil {
			return nil, err
		}
		startedAt, _ := s.started.Load(id)
		if i < 10 {
			continue // warm-up: connections, prepared statements
		}
		toStart = append(toStart, startedAt.(time.Time).Sub(submitted))
		toSuccess = append(toSuccess, done[0].at.Sub(submitted))
	}
	u, err := p.stop(ctx, n-10) // after the warm-up
	if err != nil {
		return nil, err
	}
	r := &Result{Scenario: "latency", Jobs: n - 10}
	r.add("start_p50_ms", percentile(toStart, 50))
	r.add("start_p99_ms", percentile(toStart, 99))
	r.add("start_max_ms", percentile(toStart, 100))
	r.add("e2e_p50_ms", percentile(toSuccess, 50))
	r.add("e2e_p99_ms", percentile(toSuccess, 99))
	r.add("e2e_max_ms", percentile(toSuccess, 100))
	r.addUsage(u)
	return r, nil
}

// steady: a constant submit rate for a fixed time; end-to-end latency under
// load and whether the rate was sustained.
func steady(ctx context.Context, opts Options) (*Result, error) {
	s, err := newSystem(ctx, opts, systemConfig{slots: opts.Slots})
	if err != nil {
		return nil, err
	}
	defer s.close()
	const tick = 10 * time.Millisecond
	perTick := max(opts.Rate*int(tick)/int(time.Second), 1)
	ticks := int(opts.Duration / tick)
	submittedAt := make(map[string]time.Time, perTick*ticks)
	p, err := s.startPhase(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	next := start
	behind := 0
	for t := range ticks {
		subs := submissions(perTick, func(i int) string { return fmt.Sprintf("g%d", (t*perTick+i)%10) })
		now := time.Now()
		for _, sub := range subs {
			submittedAt[sub.ID] = now
		}
		if _, err := s.client.SubmitMany(ctx, subs); err != nil {
			return nil, err
		}
		next = next.Add(tick)
		if d := time.Until(next); d > 0 {
			time.Sleep(d) // pacing the load generator, not synchronisation
		} else {
			behind++
		}
	}
	submitDur := time.Since(start)
	total := perTick * ticks
	arrivals, err := s.waitFinished(ctx, total, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	var e2e []time.Duration
	for _, a := range arrivals {
		e2e = append(e2e, a.at.Sub(submittedAt[a.ev.JobID]))
	}
	drainDur := time.Since(start)
	u, err := p.stop(ctx, total)
	if err != nil {
		return nil, err
	}
	offered := float64(total) / submitDur.Seconds()
	worked := float64(total) / drainDur.Seconds()
	r := &Result{Scenario: "steady", Jobs: total}
	r.add("rate_target_per_s", opts.Rate)
	r.add("rate_offered_per_s", offered)
	r.add("work_jobs_per_s", worked)
	r.add("sustained", offered >= 0.95*float64(opts.Rate) && percentile(e2e, 99) < 1000)
	r.add("e2e_p50_ms", percentile(e2e, 50))
	r.add("e2e_p99_ms", percentile(e2e, 99))
	r.add("e2e_max_ms", percentile(e2e, 100))
	r.addUsage(u)
	return r, nil
}

// fairness: group A submits a backlog of N jobs of D ms each, then group B
// submits M jobs; W slots. B's wait (submit to start) against pure FIFO
// and plain round-robin. The second case has NoisyTenants groups, each
// with a backlog of N, instead of A alone.
func fairness(ctx context.Context, opts Options) (*Result, error) {
	const n, d, m, w = 2000, 5 * time.Millisecond, 20, 10
	r := &Result{Scenario: "fairness", Jobs: n + m}
	one, err := fairnessCase(ctx, opts, []string{"a"}, n, d, m, w, nil)
	if err != nil {
		return nil, err
	}
	r.add("b_p50_wait_ms", percentile(one.waits, 50))
	r.add("b_max_wait_ms", percentile(one.waits, 100))
	r.add("fifo_b_wait_ms", float64(n*int(d/time.Millisecond))/w)
	r.add("fair_b_max_wait_ms", fairMaxWait(1, m, w, d))
	r.add("b_stored_max_ms", percentile(one.stored, 100))
	r.add("n", n)
	r.add("d_ms", int(d/time.Millisecond))
	r.add("m", m)
	r.add("w", w)
	total := one.usage
	if opts.NoisyTenants > 0 {
		noisy := make([]string, opts.NoisyTenants)
		for i := range noisy {
			noisy[i] = fmt.Sprintf("noisy-%02d", i+1)
		}
		many, err := fairnessCase(ctx, opts, noisy, n, d, m, w, nil)
		if err != nil {
			return nil, fmt.Errorf("with %d noisy tenants: %w", len(noisy), err)
		}
		r.Jobs += len(noisy)*n + m
		r.add("noisy_tenants", len(noisy))
		r.add("noisy_b_p50_wait_ms", percentile(many.waits, 50))
		r.add("noisy_b_max_wait_ms", percentile(many.waits, 100))
		r.add("noisy_fifo_b_wait_ms", float64(len(noisy)*n*int(d/time.Millisecond))/w)
		r.add("noisy_fair_b_max_wait_ms", fairMaxWait(len(noisy), m, w, d))
		r.add("noisy_b_stored_max_ms", percentile(many.stored, 100))
		total.add(many.usage)
	}
	r.addUsage(total) // both cases'
	return r, nil
}

// fairMaxWait is B's longest wait under plain round-robin with every
// group busy, for comparison: each round starts one job of each of the
// k+1 groups, so B's last (m-th) job starts after (m-1)·(k+1) other
// starts, w at a time, each slot freed after d.
func fairMaxWait(k, m, w int, d time.Duration) float64 {
	return float64((m-1)*(k+1)/w) * float64(d) / float64(time.Millisecond)
}

// fairnessWaits is what one fairness case measured of group B's jobs.
type fairnessWaits struct {
	waits  []time.Duration // from B's submission to each job's start
	stored []time.Duration // from B's submission to each job's waiting event
	// heldMax is the most jobs each group ran at once.
	heldMax map[string]int
	// usage is the case's cost, from the first submission to the last
	// job's success.
	usage usage
}

// fairnessCase: each of the noisy groups submits n jobs of d, then group
// B submits m, on an executor of w slots; B's waits. limits, when set,
// sets concurrency limits before anything is submitted.
func fairnessCase(ctx context.Context, opts Options, noisy []string, n int, d time.Duration, m, w int, limits func(*events.Client) error) (*fairnessWaits, error) {
	var mu sync.Mutex
	held, heldMax := map[string]int{}, map[string]int{}
	s, err := newSystem(ctx, opts, systemConfig{slots: w, handler: func(ctx context.Context, job *executor.Job) error {
		mu.Lock()
		held[job.Group]++
		heldMax[job.Group] = max(heldMax[job.Group], held[job.Group])
		mu.Unlock()
		defer func() {
			mu.Lock()
			held[job.Group]--
			mu.Unlock()
		}()
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return nil
	}})
	if err != nil {
		return nil, err
	}
	defer s.close()
	if limits != nil {
		if err := limits(s.client); err != nil {
			return nil, err
		}
	}
	p, err := s.startPhase(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range noisy {
		if _, err := s.client.SubmitMany(ctx, submissions(n, func(int) string { return g })); err != nil {
			return nil, err
		}
	}
	// B submits once the noisy backlog is stored and running.
	if _, err := s.waitFinished(ctx, 1, time.Minute); err != nil {
		return nil, err
	}
	// When each of B's jobs was stored: the part of B's wait spent behind
	// the noisy submissions in the ingest stream.
	stored, err := watchStored(ctx, s, events.Filter{Group: "b"}, m)
	if err != nil {
		return nil, err
	}
	defer stored.stop()
	bSubs := submissions(m, func(int) string { return "b" })
	bAt := time.Now()
	if _, err := s.client.SubmitMany(ctx, bSubs); err != nil {
		return nil, err
	}
	if _, err := s.waitFinished(ctx, len(noisy)*n+m-1, 10*time.Minute); err != nil {
		return nil, err
	}
	u, err := p.stop(ctx, len(noisy)*n+m)
	if err != nil {
		return nil, err
	}
	mu.Lock()
	out := &fairnessWaits{heldMax: maps.Clone(heldMax), usage: u}
	mu.Unlock()
	times, err := stored.collect("group b's")
	if err != nil {
		return nil, err
	}
	for _, t := range times {
		out.stored = append(out.stored, t.Sub(bAt))
	}
	for _, sub := range bSubs {
		at, ok := s.started.Load(sub.ID)
		if !ok {
			return nil, fmt.Errorf("job %s of group b never started", sub.ID)
		}
		out.waits = append(out.waits, at.(time.Time).Sub(bAt))
	}
	return out, nil
}

// drainSample is how many jobs the scale scenario's drain rate is timed on.
const drainSample = 10_000

// scale: the drain rate with 10,000, 100,000 and 1,000,000 waiting jobs
// over 10,000 groups, the leader's catch-up after their storing, and peak
// RSS.
func scale(ctx context.Context, opts Options) (*Result, error) {
	r := &Result{Scenario: "scale"}
	const groups = 10_000
	var firstRate, lastRate, peakRSS float64
	var rssKey string
	var total usage
	for _, size := range opts.ScaleSizes {
		s, err := newSystem(ctx, opts, systemConfig{slots: opts.Slots, noExecutors: true})
		if err != nil {
			return nil, err
		}
		err = func() error {
			defer s.close()
			// The journal's leader folds the jobs stored and publishes
			// their waiting events after their commits, and the drain is
			// timed once it has caught up: the catch-up is the ingest's
			// cost, not the queue length's (reported apart: catchup_s).
			var announced atomic.Int64
			caughtUp := make(chan struct{})
			sub, err := s.client.Subscribe(ctx, events.Filter{State: fairway.StateWaiting}, func(events.Event) {
				if announced.Add(1) == int64(size) {
					close(caughtUp)
				}
			})
			if err != nil {
				return err
			}
			defer sub.Stop()
			opts.Logger.Info("bench: scale: storing waiting jobs", "jobs", size, "groups", groups)
			for done := 0; done < size; done += 10_000 {
				if done > 0 && done%200_000 == 0 {
					opts.Logger.Info("bench: scale: storing waiting jobs", "stored", done, "total", size)
				}
				batch := withArgs(submissions(min(10_000, size-done), func(i int) string { return fmt.Sprintf("g%05d", (done+i)%groups) }))
				if err := s.storeWaiting(ctx, batch); err != nil {
					return err
				}
			}
			if err := s.store.Analyze(ctx); err != nil {
				return err
			}
			stored := time.Now()
			progress := time.NewTicker(10 * time.Second)
			defer progress.Stop()
			for giveUp := time.After(10 * time.Minute); ; {
				select {
				case <-caughtUp:
				case <-progress.C:
					opts.Logger.Info("bench: scale: the coordinator catches up", "announced", announced.Load(), "total", size)
					continue
				case <-giveUp:
					return fmt.Errorf("the coordinator announced %d of %d waiting jobs within 10 minutes of their storing", announced.Load(), size)
				case <-ctx.Done():
					return ctx.Err()
				}
				break
			}
			// The catch-up ends with the snapshot that covers it (taken
			// within 10 s, once the events are published): a million
			// jobs' snapshot would fall in the drain timed.
			if err := s.awaitSnapshot(ctx); err != nil {
				return err
			}
			r.add(fmt.Sprintf("catchup_s_%d", size), time.Since(stored).Seconds())
			caughtKey, caughtMiB := s.rssNow("_caught_up")
			r.add(fmt.Sprintf("%s_%d", caughtKey, size), caughtMiB)
			// Drain rate: start the executors and time the first
			// drainSample jobs to run (counted in the handler: the event
			// stream lags behind a million waiting events here).
			sample := min(drainSample, size)
			s.ranTarget.Store(int64(sample))
			p, err := s.startPhase(ctx)
			if err != nil {
				return err
			}
			start := time.Now()
			if err := s.startExecutors(ctx, systemConfig{slots: opts.Slots}); err != nil {
				return err
			}
			select {
			case <-s.ranEnough:
			case <-time.After(10 * time.Minute):
				return fmt.Errorf("only %d of %d jobs ran within 10 minutes", s.ran.Load(), sample)
			case <-ctx.Done():
				return ctx.Err()
			}
			rate := float64(sample) / time.Since(start).Seconds()
			u, err := p.stop(ctx, sample)
			if err != nil {
				return err
			}
			total.add(u)
			if firstRate == 0 {
				firstRate = rate
			}
			lastRate = rate
			r.Jobs += size
			r.add(fmt.Sprintf("work_jobs_per_s_%d", size), rate)
			key, mib := s.rss()
			r.add(fmt.Sprintf("%s_%d", key, size), mib)
			rssKey, peakRSS = key, max(peakRSS, mib)
			return nil
		}()
		if err != nil {
			return nil, err
		}
	}
	if firstRate > 0 {
		r.add("drain_ratio_largest_to_smallest", lastRate/firstRate)
	}
	r.add(rssKey, peakRSS) // the largest of the sizes'
	r.add("groups", groups)
	r.addUsage(total) // the timed drains' (of drainSample jobs at each size)
	return r, nil
}

// awaitSnapshot waits until the journal's leader has taken a snapshot
// after now (a minute at most).
func (s *system) awaitSnapshot(ctx context.Context) error {
	var now time.Time
	if err := s.store.Pool().QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		taken, ok, err := journal.SnapshotTaken(ctx, s.store.Pool(), 0)
		if err != nil {
			return err
		}
		if ok && taken.After(now) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("the journal's leader took no snapshot within a minute of catching up")
}

// chainLength is the length of the dependency chains of the features
// scenario's drain.
const chainLength = 10

// features: the drain and the fairness case with concurrency limits and
// dependencies in play, beside the plain ones, in one run:
//   - the drain of opts.Jobs no-op jobs, plain; with limits in force that
//     do not bind (every group may hold all slots, the task all of them):
//     the cost of reading and applying them in every claim; and as chains
//     of 10 jobs per group, each job depending on the one before (so each
//     job's release follows the end of its predecessor);
//   - the fairness case (group A's 2,000 jobs of 5 ms, then B's 20, on 10
//     slots), plain and with every group limited to half the slots: A
//     then never holds more than 5, and B starts at once.
func features(ctx context.Context, opts Options) (*Result, error) {
	r := &Result{Scenario: "features", Jobs: 3 * opts.Jobs}
	var total usage
	type drainCase struct {
		key    string
		limits func(c *events.Client) error
		chain  bool
	}
	for _, c := range []drainCase{
		{key: "plain"},
		{key: "limits", limits: func(c *events.Client) error {
			if _, err := c.SetLimit(ctx, store.LimitGroup, store.AnyGroup, opts.Slots); err != nil {
				return err
			}
			_, err := c.SetLimit(ctx, store.LimitTask, "work", opts.Slots)
			return err
		}},
		{key: "chains", chain: true},
	} {
		rate, err := func() (float64, error) {
			s, err := newSystem(ctx, opts, systemConfig{slots: opts.Slots})
			if err != nil {
				return 0, err
			}
			defer s.close()
			if c.limits != nil {
				if err := c.limits(s.client); err != nil {
					return 0, err
				}
			}
			subs := submissions(opts.Jobs, func(i int) string { return fmt.Sprintf("g%d", i%10) })
			if c.chain {
				// Job i depends on the group's job before it (i-10), in
				// chains of chainLength.
				for i := range subs {
					if (i/10)%chainLength != 0 {
						subs[i].DependsOn = []string{subs[i-10].ID}
					}
				}
			}
			p, err := s.startPhase(ctx)
			if err != nil {
				return 0, err
			}
			start := time.Now()
			if _, err := s.client.SubmitMany(ctx, subs); err != nil {
				return 0, err
			}
			if _, err := s.waitFinished(ctx, len(subs), 10*time.Minute); err != nil {
				return 0, err
			}
			rate := float64(len(subs)) / time.Since(start).Seconds()
			u, err := p.stop(ctx, len(subs))
			total.add(u)
			return rate, err
		}()
		if err != nil {
			return nil, fmt.Errorf("drain (%s): %w", c.key, err)
		}
		r.add("work_jobs_per_s_"+c.key, rate)
	}
	const n, d, m, w = 2000, 5 * time.Millisecond, 20, 10
	plain, err := fairnessCase(ctx, opts, []string{"a"}, n, d, m, w, nil)
	if err != nil {
		return nil, err
	}
	half := func(c *events.Client) error {
		_, err := c.SetLimit(ctx, store.LimitGroup, store.AnyGroup, w/2)
		return err
	}
	limited, err := fairnessCase(ctx, opts, []string{"a"}, n, d, m, w, half)
	if err != nil {
		return nil, fmt.Errorf("fairness with limits: %w", err)
	}
	r.Jobs += 2 * (n + m)
	r.add("b_max_wait_ms_plain", percentile(plain.waits, 100))
	r.add("b_max_wait_ms_limits", percentile(limited.waits, 100))
	r.add("a_held_max_limits", limited.heldMax["a"])
	r.add("group_limit", w/2)
	r.add("slots", opts.Slots)
	r.add("fairness_slots", w)
	r.add("chain_length", chainLength)
	total.add(plain.usage)
	total.add(limited.usage)
	r.addUsage(total) // the three drains' and the two fairness cases'
	return r, nil
}

// shortJobLength is the length of each job of the short-jobs scenario, and
// shortJobsLead how long after their submission all of them are due.
const (
	shortJobLength = 5 * time.Millisecond
	shortJobsLead  = time.Second
)

// shortJobs: opts.ShortJobs jobs of 5 ms over 10 groups, all due at the
// same moment 1 s after their submission (so all are stored before any
// may start), on opts.ShortJobSlots slots; how busy the slots were from
// that moment to the last job's end: busy_share = jobs × 5 ms ÷ (slots ×
// makespan). The times are the executor's: the handler notes when each
// job's 5 ms began and ended.
func shortJobs(ctx context.Context, opts Options) (*Result, error) {
	n, w := opts.ShortJobs, opts.ShortJobSlots
	var mu sync.Mutex
	var firstStart, lastEnd time.Time
	var ran time.Duration // the handlers' time, from start to end
	s, err := newSystem(ctx, opts, systemConfig{slots: w, handler: func(ctx context.Context, job *executor.Job) error {
		start := time.Now()
		select {
		case <-time.After(shortJobLength):
		case <-ctx.Done():
			return ctx.Err()
		}
		end := time.Now()
		mu.Lock()
		ran += end.Sub(start)
		if firstStart.IsZero() || start.Before(firstStart) {
			firstStart = start
		}
		if end.After(lastEnd) {
			lastEnd = end
		}
		mu.Unlock()
		return nil
	}})
	if err != nil {
		return nil, err
	}
	defer s.close()
	// When each job was stored: all must be before the due time, or the
	// makespan would include their ingest.
	stored, err := watchStored(ctx, s, events.Filter{}, n)
	if err != nil {
		return nil, err
	}
	defer stored.stop()
	subs := s.jobs(n, func(i int) string { return fmt.Sprintf("g%d", i%10) }, int(shortJobLength/time.Millisecond))
	p, err := s.startPhase(ctx)
	if err != nil {
		return nil, err
	}
	submitAt := time.Now()
	due := submitAt.Add(shortJobsLead).Truncate(time.Microsecond) // PostgreSQL's precision
	for i := range subs {
		subs[i].RunAt = &due
	}
	if _, err := s.client.SubmitMany(ctx, subs); err != nil {
		return nil, err
	}
	times, err := stored.collect("the")
	if err != nil {
		return nil, err
	}
	var lastStored time.Time
	for _, t := range times {
		if t.After(lastStored) {
			lastStored = t
		}
	}
	if !lastStored.Before(due) {
		return nil, fmt.Errorf("the last of the %d jobs was stored %s after its submission, not before the jobs were due (%s after): the figures would include ingest", n, lastStored.Sub(submitAt), shortJobsLead)
	}
	if _, err := s.waitFinished(ctx, n, 10*time.Minute); err != nil {
		return nil, err
	}
	u, err := p.stop(ctx, n)
	if err != nil {
		return nil, err
	}
	if opts.external() {
		// The handlers ran in another process: their times are in the
		// records.
		groups := make([]string, 10)
		for i := range groups {
			groups[i] = fmt.Sprintf("g%d", i)
		}
		first, last, sum, read, err := s.handlerTimes(ctx, groups)
		if err != nil {
			return nil, err
		}
		if read != n {
			return nil, fmt.Errorf("read %d records of the %d jobs", read, n)
		}
		mu.Lock()
		firstStart, lastEnd, ran = first, last, sum
		mu.Unlock()
	}
	mu.Lock()
	makespan, firstWait, handlers := lastEnd.Sub(due), firstStart.Sub(due), ran
	mu.Unlock()
	r := &Result{Scenario: "short-jobs", Jobs: n}
	r.add("busy_share", hundredths(math.Round(float64(n)*float64(shortJobLength)/(float64(w)*float64(makespan))*100)/100))
	// The slots' share spent in handlers, which a loaded machine's
	// timers stretch past 5 ms: busy_share's shortfall is this one's
	// (slots left waiting for a job) plus the handlers' overrun.
	r.add("handler_share", hundredths(math.Round(float64(handlers)/(float64(w)*float64(makespan))*100)/100))
	r.add("handler_mean_ms", ms(handlers/time.Duration(max(n, 1))))
	r.add("makespan_ms", ms(makespan))
	r.add("ideal_makespan_ms", ms(time.Duration((n+w-1)/w)*shortJobLength))
	r.add("first_start_ms", ms(firstWait))
	r.add("stored_ms", ms(lastStored.Sub(submitAt)))
	r.add("slots", w)
	r.add("job_ms", int(shortJobLength/time.Millisecond))
	r.addUsage(u)
	return r, nil
}

// storedTimes are the times of the waiting events of n jobs: when each was
// stored.
type storedTimes struct {
	n   int
	ch  chan time.Time
	sub events.Subscription
}

// watchStored subscribes to the waiting events that f (its group, task)
// selects, for n jobs.
func watchStored(ctx context.Context, s *system, f events.Filter, n int) (*storedTimes, error) {
	w := &storedTimes{n: n, ch: make(chan time.Time, n)}
	f.State = fairway.StateWaiting
	sub, err := s.client.Subscribe(ctx, f, func(ev events.Event) {
		select {
		case w.ch <- ev.Time:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	w.sub = sub
	return w, nil
}

// collect waits for the n times, a minute at most for each; whose names
// the jobs in the error.
func (w *storedTimes) collect(whose string) ([]time.Time, error) {
	times := make([]time.Time, 0, w.n)
	for range w.n {
		select {
		case t := <-w.ch:
			times = append(times, t)
		case <-time.After(time.Minute):
			return nil, fmt.Errorf("only %d of %s %d waiting events arrived", len(times), whose, w.n)
		}
	}
	return times, nil
}

func (w *storedTimes) stop() { w.sub.Stop() }

// ingestLate is how many single submissions the late group of the ingest
// scenario makes while the burst is being stored, ingestLateEvery apart.
const (
	ingestLate      = 20
	ingestLateEvery = 5 * time.Millisecond
)

// ingest: opts.Jobs held submissions from opts.Groups groups at once (each
// group's in messages of 100), and, once the first of them is stored, 20
// single submissions of a late group, 5 ms apart: how fast the burst is
// stored, how long each of the late group's waited to be stored (it must
// not wait behind the burst: each group's submissions are read on their
// own), and the coordinator's memory. Twice: the first round's groups are
// new to the coordinator (each group's first submission makes its
// consumer), the second's are known. The cost figures are the second
// round's.
func ingestScenario(ctx context.Context, opts Options) (*Result, error) {
	s, err := newSystem(ctx, opts, systemConfig{slots: 1})
	if err != nil {
		return nil, err
	}
	defer s.close()
	groups := max(opts.Groups, 1)
	n := opts.Jobs
	stored := make(chan events.Event, 2*(n+ingestLate))
	sub, err := s.client.Subscribe(ctx, events.Filter{State: fairway.StatePending}, func(ev events.Event) { stored <- ev })
	if err != nil {
		return nil, err
	}
	defer sub.Stop()
	r := &Result{Scenario: "ingest", Jobs: n}
	r.add("groups", groups)
	if opts.TenantStreams {
		// Made before the measure, as provisioning makes them.
		js, err := jetstream.New(s.nc)
		if err != nil {
			return nil, err
		}
		for g := range groups {
			if err := events.EnsureTenantSubmitStream(ctx, js, events.NewSubjects(""), fmt.Sprintf("t%d", g), events.StreamOptions{}); err != nil {
				return nil, err
			}
		}
		r.add("tenant_streams", groups)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for round, name := range []string{"new", "known"} {
		subs := submissions(n, func(i int) string { return fmt.Sprintf("t%d", i%groups) })
		for i := range subs {
			subs[i].Pending = true // stored, never run: only ingest is measured
		}
		p, err := s.startPhase(ctx)
		if err != nil {
			return nil, err
		}
		rate, lateWaits, err := ingestRound(ctx, s, subs, stored, round)
		if err != nil {
			return nil, err
		}
		r.add("stored_per_s_"+name, rate)
		if len(lateWaits) > 0 {
			r.add("late_stored_after_p50_ms_"+name, ms(lateWaits[len(lateWaits)/2]))
			r.add("late_stored_after_max_ms_"+name, ms(lateWaits[len(lateWaits)-1]))
		}
		u, err := p.stop(ctx, n)
		if err != nil {
			return nil, err
		}
		if round == 1 {
			r.add(s.rss())
			if s.natsPid != 0 {
				r.add("nats_rss_mib", peakRSSMiB(s.natsPid)) // the groups' consumers live there
			}
			r.addUsage(u)
		}
	}
	return r, nil
}

// ingestRound publishes subs at once, and the late group's submissions
// once the first of subs is stored, and waits until all are stored: the
// burst's rate, and the late group's waits, sorted.
func ingestRound(ctx context.Context, s *system, subs []fairway.Submission, stored <-chan events.Event, round int) (float64, []time.Duration, error) {
	n := len(subs)
	start := time.Now()
	published := make(chan error, 1)
	go func() {
		switch {
		case s.opts.TenantStreams:
			published <- publishToTenantStreams(ctx, s, subs)
		case s.opts.Single:
			published <- publishEach(ctx, s, subs)
		default:
			_, err := s.client.SubmitMany(ctx, subs)
			published <- err
		}
	}()
	var late sync.Map // id -> when it was submitted
	var lateWaits []time.Duration
	count, burstStored := 0, 0
	var lastBurst time.Time
	timeout := time.After(10 * time.Minute)
	for count < n+ingestLate {
		select {
		case ev := <-stored:
			count++
			if at, ok := late.Load(ev.JobID); ok && ev.Group == "late" {
				lateWaits = append(lateWaits, ev.Time.Sub(at.(time.Time)))
				break
			}
			burstStored++
			lastBurst = time.Now()
			if burstStored == 1 {
				// The burst is being stored: the late group submits now.
				go func() {
					for i := range ingestLate {
						id := fmt.Sprintf("late-%d-%d", round, i)
						late.Store(id, time.Now())
						if _, err := s.client.Submit(ctx, fairway.Submission{ID: id, Group: "late", Task: "work", Pending: true}); err != nil {
							s.opts.Logger.Warn("bench: a late submission failed", "error", err)
						}
						time.Sleep(ingestLateEvery) // pacing the load generator
					}
				}()
			}
		case err := <-published:
			if err != nil {
				return 0, nil, err
			}
		case <-timeout:
			return 0, nil, fmt.Errorf("only %d of %d submissions stored within 10 minutes", count, n+ingestLate)
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	slices.Sort(lateWaits)
	return float64(n) / lastBurst.Sub(start).Seconds(), lateWaits, nil
}

// publishToTenantStreams publishes subs as tenants' submissions arrive in
// operator mode: to each group's stream of its own (made by
// ingestScenario, as 'fairway creds add tenant' makes it), its subject
// tenant-submit.<group>.<task> (the tenant's import renames its
// submit.<group>.<task> to it), 100 to a message.
func publishToTenantStreams(ctx context.Context, s *system, subs []fairway.Submission) error {
	js, err := jetstream.New(s.nc)
	if err != nil {
		return err
	}
	subjects := events.NewSubjects("")
	groups := map[string][]json.RawMessage{}
	var order []string
	for _, sub := range subs {
		if _, ok := groups[sub.Group]; !ok {
			order = append(order, sub.Group)
		}
		data, err := json.Marshal(sub)
		if err != nil {
			return err
		}
		groups[sub.Group] = append(groups[sub.Group], data)
	}
	var msgs []*nats.Msg
	for _, g := range order {
		for part := range slices.Chunk(groups[g], 100) {
			body, err := json.Marshal(part)
			if err != nil {
				return err
			}
			msgs = append(msgs, &nats.Msg{Subject: subjects.TenantSubmit(g, "work"), Data: body})
		}
	}
	return publishAll(ctx, js, msgs)
}

// publishEach publishes each submission as a message of its own, as a
// client in another language does, 256 in flight.
func publishEach(ctx context.Context, s *system, subs []fairway.Submission) error {
	js, err := jetstream.New(s.nc)
	if err != nil {
		return err
	}
	subjects := events.NewSubjects("")
	msgs := make([]*nats.Msg, 0, len(subs))
	for _, sub := range subs {
		data, err := json.Marshal(sub)
		if err != nil {
			return err
		}
		msgs = append(msgs, &nats.Msg{Subject: subjects.Submit(sub.Group, sub.Task), Data: data})
	}
	return publishAll(ctx, js, msgs)
}

// publishAll publishes msgs, 256 in flight.
func publishAll(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) error {
	var futures []jetstream.PubAckFuture
	wait := func() error {
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futures = futures[:0]
		return nil
	}
	for _, msg := range msgs {
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			return err
		}
		if futures = append(futures, f); len(futures) == 256 {
			if err := wait(); err != nil {
				return err
			}
		}
	}
	return wait()
}
