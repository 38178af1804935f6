package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/store"
)

// Defaults of dependentsConfig.
const (
	// blockedSweepInterval is how often every blocked job is checked
	// again: the safety net for an end whose resolution was lost (a
	// coordinator that died between the two, PostgreSQL unreachable then).
	blockedSweepInterval = 10 * time.Second
	// blockedSweepBatch bounds the jobs one sweep statement checks.
	blockedSweepBatch = 1000
)

// dependentsConfig configures the resolution of dependents.
type dependentsConfig struct {
	// SweepInterval is how often the blocked jobs are swept. Defaults to
	// blockedSweepInterval.
	SweepInterval time.Duration
	// SweepBatch bounds the jobs one sweep statement checks. Defaults to
	// blockedSweepBatch.
	SweepBatch int
}

func (c dependentsConfig) withDefaults() dependentsConfig {
	if c.SweepInterval <= 0 {
		c.SweepInterval = blockedSweepInterval
	}
	if c.SweepBatch <= 0 {
		c.SweepBatch = blockedSweepBatch
	}
	return c
}

// dependents resolves the jobs that depend on others (see
// dependencies.go). It collects what needs resolving: jobs that ended
// (their dependents are looked up) and jobs that are candidates
// themselves, and its loop resolves them in one statement for all that
// came meanwhile, on every coordinator, since each queues its own
// changes. The sweep of every blocked job, now and then, runs on the
// coordinator that leads the maintenance.
type dependents struct {
	cfg   dependentsConfig
	store *store.Store
	log   *slog.Logger
	lead  *leadership
	// afterChange follows up the jobs resolved (Coordinator.afterChange);
	// it queues the dependents of those it cancelled here in turn.
	afterChange func([]store.Applied)

	mu         sync.Mutex
	ended      []fairway.JobRef
	candidates []fairway.JobRef
	sweep      bool
	kick       chan struct{}
}

func newDependents(cfg dependentsConfig, st *store.Store, log *slog.Logger, lead *leadership, afterChange func([]store.Applied)) *dependents {
	return &dependents{cfg: cfg.withDefaults(), store: st, log: log, lead: lead, afterChange: afterChange, kick: make(chan struct{}, 1)}
}

func (d *dependents) add(ended, candidates []fairway.JobRef, sweep bool) {
	if len(ended) == 0 && len(candidates) == 0 && !sweep {
		return
	}
	d.mu.Lock()
	d.ended = append(d.ended, ended...)
	d.candidates = append(d.candidates, candidates...)
	d.sweep = d.sweep || sweep
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *dependents) take() (ended, candidates []fairway.JobRef, sweep bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ended, candidates, sweep = d.ended, d.candidates, d.sweep
	d.ended, d.candidates, d.sweep = nil, nil, false
	return ended, candidates, sweep
}

// run resolves what afterChange and the submissions queue, in one
// statement for all that came meanwhile, and sweeps the blocked jobs now
// and then, until ctx ends.
func (d *dependents) run(ctx context.Context) {
	ticker := time.NewTicker(d.cfg.SweepInterval)
	defer ticker.Stop()
	d.add(nil, nil, true) // at start: what a coordinator that died left
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-ticker.C:
			d.add(nil, nil, true)
		}
		ended, candidates, sweep := d.take()
		if len(ended) > 0 || len(candidates) > 0 {
			if err := d.resolve(ctx, ended, candidates); err != nil {
				d.log.Warn("resolving the jobs that depend on ended jobs; the sweep tries again", "jobs", len(ended)+len(candidates), "error", err)
			}
		}
		if sweep && d.lead.leading() {
			d.sweepBlocked(ctx)
		}
	}
}

// resolve releases or cancels the dependents of ended and the candidates,
// and follows the changes up (afterChange queues the dependents of the
// jobs it cancelled).
func (d *dependents) resolve(ctx context.Context, ended, candidates []fairway.JobRef) error {
	applied, err := d.store.ResolveDependents(ctx, ended, candidates)
	if err != nil {
		return err
	}
	d.logResolved(applied)
	d.afterChange(applied)
	return nil
}

// sweepBlocked checks every blocked job, a batch at a time.
func (d *dependents) sweepBlocked(ctx context.Context) {
	var after fairway.JobRef
	for ctx.Err() == nil {
		applied, next, err := d.store.ResolveBlocked(ctx, after, d.cfg.SweepBatch)
		if err != nil {
			d.log.Debug("sweeping blocked jobs", "error", err)
			return
		}
		if len(applied) > 0 {
			d.log.Info("blocked jobs resolved by the sweep", "jobs", len(applied))
			d.logResolved(applied)
			d.afterChange(applied)
		}
		if next == (fairway.JobRef{}) {
			return
		}
		after = next
	}
}

func (d *dependents) logResolved(applied []store.Applied) {
	var released, cancelled int
	for _, a := range applied {
		if a.State == fairway.StateWaiting {
			released++
		} else {
			cancelled++
		}
	}
	if len(applied) > 0 {
		d.log.Debug("dependents resolved", "released", released, "cancelled", cancelled)
	}
}

// queueChanges queues the follow-up of committed changes for the
// dependents: the jobs that ended (unless known to have no dependents:
// completions say, so a job nobody depends on costs nothing), and the
// jobs that became pending (retried by hand: they may wait for
// dependencies again).
func (d *dependents) queueChanges(applied []store.Applied) {
	var ended, candidates []fairway.JobRef
	for _, a := range applied {
		switch {
		case a.State.Final() && !a.NoDependents:
			ended = append(ended, fairway.JobRef{Group: a.Group, ID: a.JobID})
		case a.State == fairway.StatePending:
			candidates = append(candidates, fairway.JobRef{Group: a.Group, ID: a.JobID})
		}
	}
	d.add(ended, candidates, false)
}

// queueStored queues the jobs just stored with dependencies: theirs may
// have ended already.
func (d *dependents) queueStored(subs []fairway.Submission) {
	var candidates []fairway.JobRef
	for _, s := range subs {
		if len(s.DependsOn) > 0 {
			candidates = append(candidates, fairway.JobRef{Group: s.Group, ID: s.ID})
		}
	}
	d.add(nil, candidates, false)
}
