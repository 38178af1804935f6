package coordinator

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
)

// Defaults of dependentsConfig.
const (
	// blockedSweepInterval is how often every blocked job is checked
	// again: the safety net for an end whose resolution was lost (a
	// coordinator that died between the two, PostgreSQL unreachable then).
	blockedSweepInterval = 10 * time.Second
	// sweepPauseFactor spaces a group's periodic sweeps: the next starts
	// no sooner than this many times its last one's length after it
	// ended, so that a group whose blocked jobs take long to check has
	// them checked less often, not the database kept busy.
	sweepPauseFactor = 4
	// blockedSweepBatch bounds the blocked jobs a group's sweep reads
	// per turn.
	blockedSweepBatch = 64
	// resolveGroupSlice bounds the candidates a group offers per turn.
	resolveGroupSlice = 64
	// resolveRoundGroups bounds the groups that take a turn in one round.
	resolveRoundGroups = 256
	// resolveEndedPerGroup bounds the ended jobs of a group whose
	// dependents one turn looks up.
	resolveEndedPerGroup = 16
	// resolveRetryAfter is the pause after a statement failed.
	resolveRetryAfter = time.Second
)

// dependentsConfig configures the resolution of dependents.
type dependentsConfig struct {
	// SweepInterval is how often the leader starts sweeping the groups
	// with blocked jobs. Defaults to blockedSweepInterval.
	SweepInterval time.Duration
	// SweepBatch bounds the blocked jobs a group's sweep reads per turn.
	// Defaults to blockedSweepBatch.
	SweepBatch int
	// GroupSlice bounds the candidates a group offers per turn. Defaults
	// to resolveGroupSlice.
	GroupSlice int
	// StatementJobs bounds the candidates of one resolution statement.
	// Defaults to store.ResolveJobsDefault.
	StatementJobs int
	// Bounds bounds the dependency entries a statement, and a group's
	// slice of it, checks (store's defaults).
	Bounds store.ResolveBounds
	// DependentsLimit bounds the dependents read for a group's ended
	// jobs per turn: beyond, the group is swept. Defaults to
	// store.DependentsLimitDefault.
	DependentsLimit int
	// EndedPerGroup bounds the ended jobs of a group whose dependents one
	// turn looks up. Defaults to resolveEndedPerGroup.
	EndedPerGroup int
	// RoundGroups bounds the groups that take a turn in one round.
	// Defaults to resolveRoundGroups.
	RoundGroups int
}

func (c dependentsConfig) withDefaults() dependentsConfig {
	if c.SweepInterval <= 0 {
		c.SweepInterval = blockedSweepInterval
	}
	if c.SweepBatch <= 0 {
		c.SweepBatch = blockedSweepBatch
	}
	if c.GroupSlice <= 0 {
		c.GroupSlice = resolveGroupSlice
	}
	if c.StatementJobs <= 0 {
		c.StatementJobs = store.ResolveJobsDefault
	}
	if c.DependentsLimit <= 0 {
		c.DependentsLimit = store.DependentsLimitDefault
	}
	if c.EndedPerGroup <= 0 {
		c.EndedPerGroup = resolveEndedPerGroup
	}
	if c.RoundGroups <= 0 {
		c.RoundGroups = resolveRoundGroups
	}
	return c
}

// dependents resolves the jobs that depend on others (see
// dependencies.go), on every coordinator, since each queues its own
// changes: jobs that ended (their blocked dependents are looked up) and
// jobs that are candidates themselves (just stored, retried).
//
// A tenant sets the cost of that work (how many jobs wait, on how many
// dependencies each), so it is queued per group and done in rounds in
// which each group with work takes a turn: a bounded slice of its work,
// whatever it has queued. A round is at most three statements: the
// look-up of the dependents of the turns' ended jobs (at most
// EndedPerGroup each, and DependentsLimit dependents: a group whose ended
// jobs have more is swept instead), the read of the next slice of the
// groups that are being swept, and one resolution of the turns'
// candidates (at most GroupSlice each, StatementJobs in all, and the
// dependency entries of Bounds). The groups of a round go to the back of
// the queue, except those the statement's bounds left out entirely, which
// go first in the next. So a group with one job to resolve waits for at
// most the round under way and its own, however much another has queued.
//
// The sweep checks a group's blocked jobs a slice per turn, in key
// order: the leader sweeps every group with blocked jobs at start and
// every SweepInterval (a group no sooner than sweepPauseFactor times its
// last sweep's length after it); any coordinator sweeps a group whose
// ended jobs have too many dependents to look up, or after a statement
// about it failed. What is queued lives in memory: a coordinator that
// dies loses it, and the leader's sweep finds it.
type dependents struct {
	cfg dependentsConfig
	serviceBase
	lead *leadership
	// afterChange follows up the jobs resolved (Coordinator.afterChange);
	// it queues the dependents of those it cancelled here in turn.
	afterChange func([]store.Applied)
	now         func() time.Time
	// off: the journal engine's leader resolves dependents itself
	// (Config.Engine): nothing is queued here, and run returns at once.
	off bool

	mu     sync.Mutex
	groups map[string]*depGroup
	ring   []*depGroup // the groups with work, in turn order
	// sweep asks for a sweep of every group with blocked jobs; force
	// ignores the groups' pauses.
	sweep, force bool
	kick         chan struct{}
}

// depGroup is a group's queued work.
type depGroup struct {
	name     string
	ended    []string // jobs that ended: their dependents are looked up
	endedSet map[string]bool
	cands    []string // jobs to check
	candSet  map[string]bool
	// offer is how many candidates the group offers next turn: fewer
	// after the statement's bounds left some (its jobs have many
	// dependencies), more again after they did not.
	offer  int
	inRing bool
	// The sweep: on, from after (key order), since from; again: start
	// over when it ends (asked for after it had begun).
	sweeping, again bool
	after           string
	from            time.Time
	// notBefore: no periodic sweep of the group starts before.
	notBefore time.Time
}

func (g *depGroup) hasWork() bool { return len(g.ended) > 0 || len(g.cands) > 0 || g.sweeping }

func newDependents(cfg dependentsConfig, b serviceBase, lead *leadership, afterChange func([]store.Applied)) *dependents {
	return &dependents{cfg: cfg.withDefaults(), serviceBase: b, lead: lead, afterChange: afterChange, now: time.Now,
		groups: map[string]*depGroup{}, kick: make(chan struct{}, 1)}
}

// add queues ended jobs and candidates, each in its group's queue (once);
// sweep asks the leader for a sweep of every group with blocked jobs now.
func (d *dependents) add(ended, candidates []fairway.JobRef, sweep bool) {
	if d.off || (len(ended) == 0 && len(candidates) == 0 && !sweep) {
		return
	}
	d.mu.Lock()
	for _, r := range ended {
		g := d.groupLocked(r.Group)
		if !g.endedSet[r.ID] {
			g.endedSet[r.ID] = true
			g.ended = append(g.ended, r.ID)
		}
		d.ringLocked(g)
	}
	for _, r := range candidates {
		g := d.groupLocked(r.Group)
		g.addCand(r.ID)
		d.ringLocked(g)
	}
	if sweep {
		d.sweep, d.force = true, true
	}
	d.mu.Unlock()
	d.wake()
}

func (d *dependents) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (g *depGroup) addCand(id string) {
	if !g.candSet[id] {
		g.candSet[id] = true
		g.cands = append(g.cands, id)
	}
}

func (d *dependents) groupLocked(name string) *depGroup {
	g := d.groups[name]
	if g == nil {
		g = &depGroup{name: name, endedSet: map[string]bool{}, candSet: map[string]bool{}, offer: d.cfg.GroupSlice}
		d.groups[name] = g
	}
	return g
}

// ringLocked puts g at the back of the queue unless it is in it.
func (d *dependents) ringLocked(g *depGroup) {
	if !g.inRing && g.hasWork() {
		g.inRing = true
		d.ring = append(d.ring, g)
	}
}

// sweepGroupLocked starts a sweep of g, or has the one under way start
// over when it ends, unless it has not read a slice yet (it will read
// every blocked job after now then). The caller queues g.
func (d *dependents) sweepGroupLocked(g *depGroup) {
	switch {
	case !g.sweeping:
		g.sweeping, g.again, g.after, g.from = true, false, "", d.now()
	case g.after != "":
		g.again = true
	}
}

// run resolves what afterChange and the submissions queue, a round after
// another while there is work, and sweeps the blocked jobs now and then,
// until ctx ends.
func (d *dependents) run(ctx context.Context) {
	if d.off {
		return
	}
	ticker := time.NewTicker(d.cfg.SweepInterval)
	defer ticker.Stop()
	d.add(nil, nil, true) // at start: what a coordinator that died left
	for {
		// Idle, it waits for work; busy, it only takes what has come.
		var busy <-chan time.Time
		if d.busy() {
			busy = closedTimeChan
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			d.mu.Lock()
			d.sweep = true
			d.mu.Unlock()
		case <-d.kick:
		case <-busy:
		}
		if err := d.startSweeps(ctx); err != nil {
			d.log.Debug("listing the groups with blocked jobs", "error", err)
		}
		if err := d.round(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("resolving the jobs that depend on ended jobs; their groups are swept", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(resolveRetryAfter):
			}
		}
	}
}

// closedTimeChan is ready at once: a select that has it does not block.
var closedTimeChan = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

func (d *dependents) busy() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.ring) > 0 || d.sweep
}

// startSweeps starts the sweep asked for, on the leader: of every group
// with blocked jobs that is not swept already and whose pause is over (or
// every one, when forced: those being swept start over when done).
func (d *dependents) startSweeps(ctx context.Context) error {
	d.mu.Lock()
	sweep, force := d.sweep, d.force
	d.sweep, d.force = false, false
	d.mu.Unlock()
	if !sweep || !d.lead.leading() {
		return nil
	}
	groups, err := d.store.BlockedGroups(ctx)
	if err != nil {
		return err
	}
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, g := range d.groups {
		if !g.inRing && !g.hasWork() && !now.Before(g.notBefore) {
			delete(d.groups, name) // nothing left to remember
		}
	}
	for _, name := range groups {
		g := d.groupLocked(name)
		if force || (!g.sweeping && !now.Before(g.notBefore)) {
			d.sweepGroupLocked(g)
			d.ringLocked(g)
		}
	}
	return nil
}

// turn is a group's share of a round.
type turn struct {
	g       *depGroup
	ended   []string // whose dependents to look up
	list    bool     // read the sweep's next slice
	reached bool     // offered candidates (the statement had room)
	cands   []string // offered to the statement
	failed  bool
}

// round gives each group at the front of the queue a turn (see
// dependents).
func (d *dependents) round(ctx context.Context) error {
	turns := d.takeTurns()
	if len(turns) == 0 {
		return nil
	}
	var errs []error
	// 1. The dependents of ended jobs.
	var ended []fairway.JobRef
	for _, t := range turns {
		for _, id := range t.ended {
			ended = append(ended, fairway.JobRef{Group: t.g.name, ID: id})
		}
	}
	if len(ended) > 0 {
		deps, over, err := d.store.BlockedDependents(ctx, ended, d.cfg.DependentsLimit)
		d.mu.Lock()
		if err != nil {
			errs = append(errs, err)
			for _, t := range turns {
				if len(t.ended) > 0 {
					t.failed = true
				}
			}
		}
		for _, r := range deps {
			d.groups[r.Group].addCand(r.ID)
		}
		for _, name := range over {
			d.sweepGroupLocked(d.groups[name])
		}
		d.mu.Unlock()
	}
	// 2. The next slice of the groups being swept.
	var names, afters []string
	for _, t := range turns {
		if t.list {
			names, afters = append(names, t.g.name), append(afters, t.g.after)
		}
	}
	if len(names) > 0 {
		slice, err := d.store.BlockedJobs(ctx, names, afters, d.cfg.SweepBatch)
		if err != nil {
			errs = append(errs, err) // the sweeps go on from where they were
		} else {
			d.mu.Lock()
			for _, t := range turns {
				if t.list {
					d.sweptLocked(t.g, slice[t.g.name])
				}
			}
			d.mu.Unlock()
		}
	}
	// 3. One statement for the turns' candidates.
	d.mu.Lock()
	var cands []fairway.JobRef
	for _, t := range turns {
		if len(cands) >= d.cfg.StatementJobs {
			break
		}
		t.reached = true
		t.cands = t.g.takeCands(min(t.g.offer, d.cfg.StatementJobs-len(cands)))
		for _, id := range t.cands {
			cands = append(cands, fairway.JobRef{Group: t.g.name, ID: id})
		}
	}
	d.mu.Unlock()
	var applied []store.Applied
	var left []fairway.JobRef
	if len(cands) > 0 {
		var err error
		applied, left, err = d.store.ResolveCandidates(ctx, cands, d.cfg.Bounds)
		if err != nil {
			errs = append(errs, err)
			for _, t := range turns {
				if len(t.cands) > 0 {
					t.failed = true
				}
			}
		}
	}
	d.endRound(turns, left)
	if len(applied) > 0 {
		d.logResolved(applied)
		d.afterChange(applied)
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// takeTurns takes the groups at the front of the queue, and what each
// does in its turn.
func (d *dependents) takeTurns() []*turn {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := min(len(d.ring), d.cfg.RoundGroups)
	turns := make([]*turn, 0, n)
	for _, g := range d.ring[:n] {
		g.inRing = false
		t := &turn{g: g}
		if g.sweeping && (g.again || g.after == "") && len(g.ended) > 0 {
			// A sweep of the group starts after now (it has read
			// nothing yet, or will start over): it checks every
			// dependent of these, and looking them up (a hub's
			// thousands, again and again) would cost for nothing.
			clear(g.endedSet)
			g.ended = nil
		}
		if len(g.cands) < g.offer && len(g.ended) > 0 {
			k := min(len(g.ended), d.cfg.EndedPerGroup)
			t.ended = slices.Clone(g.ended[:k])
			for _, id := range t.ended {
				delete(g.endedSet, id)
			}
			g.ended = g.ended[k:]
		}
		t.list = g.sweeping && len(g.cands) < g.offer && len(t.ended) == 0
		turns = append(turns, t)
	}
	d.ring = d.ring[n:]
	return turns
}

// takeCands takes the first n candidates of g.
func (g *depGroup) takeCands(n int) []string {
	n = min(n, len(g.cands))
	out := slices.Clone(g.cands[:n])
	for _, id := range out {
		delete(g.candSet, id)
	}
	g.cands = g.cands[n:]
	return out
}

// sweptLocked queues the slice a group's sweep read, and moves the sweep
// on: past its end, the sweep starts over if asked meanwhile, or pauses.
func (d *dependents) sweptLocked(g *depGroup, ids []string) {
	for _, id := range ids {
		g.addCand(id)
	}
	if len(ids) == d.cfg.SweepBatch {
		g.after = ids[len(ids)-1]
		return
	}
	now := d.now()
	g.sweeping, g.after = false, ""
	g.notBefore = now.Add(sweepPauseFactor * now.Sub(g.from))
	if g.again {
		d.sweepGroupLocked(g)
	}
}

// endRound queues again what the statement left, at the front of its
// group's candidates, sweeps the groups whose statements failed (what
// they had taken is not lost: the sweep finds it), and puts the groups
// back in the queue: those that had none of their candidates taken first,
// the others last.
func (d *dependents) endRound(turns []*turn, left []fairway.JobRef) {
	d.mu.Lock()
	defer d.mu.Unlock()
	leftBy := map[string][]string{}
	for _, r := range left {
		leftBy[r.Group] = append(leftBy[r.Group], r.ID)
	}
	now := d.now()
	var first, last []*depGroup
	for _, t := range turns {
		g := t.g
		if t.failed {
			d.sweepGroupLocked(g)
		}
		// served: the turn did some of the group's work.
		served := len(t.ended) > 0 || t.list
		if l := leftBy[g.name]; len(l) > 0 {
			var again []string
			for _, id := range l {
				if !g.candSet[id] {
					g.candSet[id] = true
					again = append(again, id)
				}
			}
			g.cands = append(again, g.cands...)
			if taken := len(t.cands) - len(l); taken > 0 {
				// Its own bound left some: offer about what fits.
				g.offer = max(1, taken+taken/2)
				served = true
			}
		} else if len(t.cands) > 0 {
			g.offer = min(d.cfg.GroupSlice, 2*g.offer)
			served = true
		} else if t.reached {
			served = true
		}
		switch {
		case g.inRing:
			// Queued again during the round.
		case !g.hasWork():
			if !g.sweeping && !now.Before(g.notBefore) {
				delete(d.groups, g.name)
			}
		case !served:
			g.inRing = true
			first = append(first, g)
		default:
			g.inRing = true
			last = append(last, g)
		}
	}
	if len(first) > 0 {
		d.ring = append(first, d.ring...)
	}
	d.ring = append(d.ring, last...)
}

// resolve releases or cancels the dependents of ended and the candidates
// now, all of them, in statements of bounded work, and follows the
// changes up (afterChange queues the dependents of the jobs it
// cancelled). For a request's own jobs: the request waits for them.
func (d *dependents) resolve(ctx context.Context, ended, candidates []fairway.JobRef) error {
	applied, err := d.store.ResolveDependents(ctx, ended, candidates)
	if len(applied) > 0 {
		d.logResolved(applied)
		d.afterChange(applied)
	}
	return err
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
