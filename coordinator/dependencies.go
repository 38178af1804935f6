package coordinator

// Dependencies: jobs that wait for other jobs (REGARDS' reliant tasks).
// A job submitted with depends_on is stored pending; when a job ends, the
// jobs that name it are resolved: released (waiting) once all they depend
// on succeeded, or cancelled when one failed or was cancelled. Released
// jobs take their turn in their group's fair order like any other; a
// cancelled job's own dependents are resolved in turn.

import (
	"context"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/store"
)

const (
	// blockedSweepInterval is how often every blocked job is checked
	// again: the safety net for an end whose resolution was lost (a
	// coordinator that died between the two, PostgreSQL unreachable then).
	blockedSweepInterval = 10 * time.Second
	// blockedSweepBatch bounds the jobs one sweep statement checks.
	blockedSweepBatch = 1000
)

// dependents collects what needs resolving: jobs that ended (their
// dependents are looked up) and jobs that are candidates themselves.
type dependents struct {
	mu         sync.Mutex
	ended      []fairway.JobRef
	candidates []fairway.JobRef
	sweep      bool
	kick       chan struct{}
}

func newDependents() *dependents { return &dependents{kick: make(chan struct{}, 1)} }

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

// dependentsLoop resolves what afterChange and the submissions queue, in
// one statement for all that came meanwhile, and sweeps the blocked jobs
// now and then.
func (c *Coordinator) dependentsLoop(ctx context.Context) {
	ticker := time.NewTicker(blockedSweepInterval)
	defer ticker.Stop()
	c.deps.add(nil, nil, true) // at start: what a coordinator that died left
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.deps.kick:
		case <-ticker.C:
			c.deps.add(nil, nil, true)
		}
		ended, candidates, sweep := c.deps.take()
		if len(ended) > 0 || len(candidates) > 0 {
			if err := c.resolveDependents(ctx, ended, candidates); err != nil {
				c.log.Warn("resolving the jobs that depend on ended jobs; the sweep tries again", "jobs", len(ended)+len(candidates), "error", err)
			}
		}
		if sweep && c.lead.leads.Load() {
			c.sweepBlocked(ctx)
		}
	}
}

// resolveDependents releases or cancels the dependents of ended and the
// candidates, and follows the changes up (afterChange queues the
// dependents of the jobs it cancelled).
func (c *Coordinator) resolveDependents(ctx context.Context, ended, candidates []fairway.JobRef) error {
	applied, err := c.store.ResolveDependents(ctx, ended, candidates)
	if err != nil {
		return err
	}
	c.logResolved(applied)
	c.afterChange(applied)
	return nil
}

// sweepBlocked checks every blocked job, a batch at a time.
func (c *Coordinator) sweepBlocked(ctx context.Context) {
	var after fairway.JobRef
	for ctx.Err() == nil {
		applied, next, err := c.store.ResolveBlocked(ctx, after, blockedSweepBatch)
		if err != nil {
			c.log.Debug("sweeping blocked jobs", "error", err)
			return
		}
		if len(applied) > 0 {
			c.log.Info("blocked jobs resolved by the sweep", "jobs", len(applied))
			c.logResolved(applied)
			c.afterChange(applied)
		}
		if next == (fairway.JobRef{}) {
			return
		}
		after = next
	}
}

func (c *Coordinator) logResolved(applied []store.Applied) {
	var released, cancelled int
	for _, a := range applied {
		if a.State == fairway.StateWaiting {
			released++
		} else {
			cancelled++
		}
	}
	if len(applied) > 0 {
		c.log.Debug("dependents resolved", "released", released, "cancelled", cancelled)
	}
}

// queueDependents queues the follow-up of committed changes for the
// dependents: the jobs that ended (unless known to have no dependents:
// completions say, so a job nobody depends on costs nothing), and the
// jobs that became pending (retried by hand: they may wait for
// dependencies again).
func (c *Coordinator) queueDependents(applied []store.Applied) {
	var ended, candidates []fairway.JobRef
	for _, a := range applied {
		switch {
		case a.State.Final() && !a.NoDependents:
			ended = append(ended, fairway.JobRef{Group: a.Group, ID: a.JobID})
		case a.State == fairway.StatePending:
			candidates = append(candidates, fairway.JobRef{Group: a.Group, ID: a.JobID})
		}
	}
	c.deps.add(ended, candidates, false)
}

// storedWithDependencies queues the jobs just stored with dependencies:
// theirs may have ended already.
func (c *Coordinator) storedWithDependencies(subs []fairway.Submission) {
	var candidates []fairway.JobRef
	for _, s := range subs {
		if len(s.DependsOn) > 0 {
			candidates = append(candidates, fairway.JobRef{Group: s.Group, ID: s.ID})
		}
	}
	c.deps.add(nil, candidates, false)
}

// maxGraphJobs bounds the jobs a graph answer holds.
const maxGraphJobs = 500

func (c *Coordinator) apiGraph(ctx context.Context, group string, req events.JobRequest) (events.Reply, error) {
	jobs, err := c.store.Graph(ctx, group, req.ID, maxGraphJobs)
	return events.Reply{Jobs: jobs}, err
}

// apiWorkflow stores a workflow: all its jobs, or none.
func (c *Coordinator) apiWorkflow(ctx context.Context, r request) (events.Reply, error) {
	w, err := fairway.DecodeWorkflow(r.data, c.cfg.MaxArgsSize)
	if err != nil {
		return events.Reply{}, err
	}
	subs, err := w.Normalize(r.group, c.cfg.MaxArgsSize, *c.cfg.Retries)
	if err != nil {
		return events.Reply{}, err
	}
	// A refusal names the job: jobs[i].field.
	refuse := func(sub fairway.Submission, err error) error {
		e := *fairway.AsError(err)
		e.JobID = sub.ID
		return w.NameJob(&e)
	}
	now := time.Now()
	for _, sub := range subs {
		if err := c.tasks.check(ctx, sub.Task, now); err != nil {
			return events.Reply{}, refuse(sub, err)
		}
	}
	refused, err := c.admit(ctx, subs)
	if err != nil {
		return events.Reply{}, err
	}
	for i, e := range refused {
		if e != nil {
			return events.Reply{}, refuse(subs[i], e)
		}
	}
	for i := range subs {
		traceSubmission(ctx, &subs[i])
	}
	res, err := c.store.InsertWorkflow(ctx, subs)
	if err != nil {
		return events.Reply{}, w.NameJob(err)
	}
	c.kickOutbox()
	var created []fairway.Submission
	var blocked []fairway.JobRef
	for i, r := range res {
		if r.Created {
			created = append(created, subs[i])
			if len(subs[i].DependsOn) > 0 {
				blocked = append(blocked, fairway.JobRef{Group: subs[i].Group, ID: subs[i].ID})
			}
		}
	}
	if err := c.resolveDependents(ctx, nil, blocked); err != nil {
		c.log.Warn("resolving a workflow's jobs; the sweep tries again", "jobs", len(blocked), "error", err)
	}
	c.jobsAdded(created...)
	refs := make(map[string]string, len(w.Jobs))
	for _, j := range w.Jobs {
		refs[j.Ref] = j.ID
	}
	return events.Reply{Refs: refs}, nil
}
