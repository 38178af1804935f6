package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/executor"
)

// The shares scenario: two groups, a with jobs of sharesLongMS and b with
// jobs of sharesShortMS, both backlogged on sharesSlots slots, run for
// sharesWarm (the run times are learned) and then sharesWindow, over which
// each group's share of the slot-time is measured by the handlers. Three
// cases: counting jobs; sharing time; sharing time with a's weight 3.
const (
	sharesSlots   = 10
	sharesLongMS  = 100
	sharesShortMS = 10
	sharesWarm    = 2 * time.Second
	sharesWindow  = 6 * time.Second
)

type sharesCase struct {
	name     string
	fairness string
	weightA  float64
	// wantA is a's share by the arithmetic: counting jobs, equal starts
	// of 100 and 10 ms (100/110); sharing time, its weight's share.
	wantA float64
}

func sharesScenario(ctx context.Context, opts Options) (*Result, error) {
	r := &Result{Scenario: "shares"}
	var total usage
	for _, c := range []sharesCase{
		{"jobs", coordinator.FairnessJobs, 1, float64(sharesLongMS) / (sharesLongMS + sharesShortMS)},
		{"time", coordinator.FairnessTime, 1, 0.5},
		{"time_weights_3_1", coordinator.FairnessTime, 3, 0.75},
	} {
		shareA, busy, u, err := sharesRun(ctx, opts, c)
		if err != nil {
			return nil, fmt.Errorf("shares, %s: %w", c.name, err)
		}
		r.Jobs += u.jobs
		pct := func(v float64) float64 { return math.Round(v*1000) / 10 }
		r.add(c.name+"_a_share_pct", pct(shareA))
		r.add(c.name+"_a_expected_pct", pct(c.wantA))
		r.add(c.name+"_busy_pct", pct(busy))
		// CPU per second of the window, all processes: the cases run
		// different mixes of jobs, so a cost per job would not compare.
		var cpu time.Duration
		for _, d := range u.cpu {
			cpu += d
		}
		r.add(c.name+"_cpu_ms_per_s", math.Round(float64(cpu.Milliseconds())/sharesWindow.Seconds()))
		total.add(u)
	}
	r.add("slots", sharesSlots)
	r.add("a_ms", sharesLongMS)
	r.add("b_ms", sharesShortMS)
	r.add("window_s", sharesWindow.Seconds())
	r.addUsage(total)
	return r, nil
}

// sharesRun runs one case and returns a's share of the slot-time over the
// window, how busy the slots were, and the window's cost.
func sharesRun(ctx context.Context, opts Options, c sharesCase) (shareA, busy float64, u usage, err error) {
	type run struct {
		group      string
		start, end time.Time
	}
	var mu sync.Mutex
	var runs []run
	s, err := newSystem(ctx, opts, systemConfig{slots: sharesSlots, fairness: c.fairness, handler: func(ctx context.Context, job *executor.Job) error {
		var args struct{ MS int }
		if err := json.Unmarshal(job.Args, &args); err != nil {
			return err
		}
		start := time.Now()
		select {
		case <-time.After(time.Duration(args.MS) * time.Millisecond):
		case <-ctx.Done():
		}
		mu.Lock()
		runs = append(runs, run{job.Group, start, time.Now()})
		mu.Unlock()
		return nil
	}})
	if err != nil {
		return 0, 0, usage{}, err
	}
	defer s.close()
	if c.weightA != 1 {
		if _, err := s.client.SetWeight(ctx, "a", c.weightA); err != nil {
			return 0, 0, usage{}, err
		}
	}
	// More than either group can run in the whole case.
	span := (sharesWarm + sharesWindow).Milliseconds()
	for _, g := range []struct {
		name string
		ms   int
	}{{"a", sharesLongMS}, {"b", sharesShortMS}} {
		n := int(2 * sharesSlots * span / int64(g.ms))
		subs := submissions(n, func(int) string { return g.name })
		for i := range subs {
			subs[i].Args = json.RawMessage(fmt.Sprintf(`{"ms":%d}`, g.ms))
		}
		if _, err := s.client.SubmitMany(ctx, subs); err != nil {
			return 0, 0, usage{}, err
		}
	}
	start := time.Now()
	select {
	case <-time.After(sharesWarm):
	case <-ctx.Done():
		return 0, 0, usage{}, ctx.Err()
	}
	p, err := s.startPhase(ctx)
	if err != nil {
		return 0, 0, usage{}, err
	}
	from := time.Now()
	select {
	case <-time.After(sharesWindow):
	case <-ctx.Done():
		return 0, 0, usage{}, ctx.Err()
	}
	to := time.Now()
	mu.Lock()
	used := map[string]time.Duration{}
	jobs := 0
	for _, r := range runs {
		b, e := max(r.start.UnixNano(), from.UnixNano()), min(r.end.UnixNano(), to.UnixNano())
		if e > b {
			used[r.group] += time.Duration(e - b)
		}
		if !r.end.Before(from) && r.end.Before(to) {
			jobs++
		}
	}
	mu.Unlock()
	if u, err = p.stop(ctx, jobs); err != nil {
		return 0, 0, usage{}, err
	}
	all := used["a"] + used["b"]
	if all == 0 {
		return 0, 0, u, fmt.Errorf("no job ran in the window (%s after the start)", from.Sub(start))
	}
	return float64(used["a"]) / float64(all), float64(all) / float64(sharesSlots*(to.Sub(from))), u, nil
}
