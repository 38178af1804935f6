package coordinator

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/fairness"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/partition"
	istore "github.com/fairwayhq/fairway/internal/store"
)

// apiPartitions answers partitions: each partition of the journal as this
// coordinator follows it (every coordinator does), its lease and how far
// its events trail as PostgreSQL says.
func (c *Coordinator) apiPartitions(ctx context.Context, _ request) (events.Reply, error) {
	out := make([]fairway.Partition, 0, len(c.parts))
	for _, e := range c.parts {
		p, err := e.status(ctx)
		if err != nil {
			return events.Reply{}, err
		}
		out = append(out, p)
	}
	return events.Reply{Partitions: out}, nil
}

// status is the engine's partition as operators see it.
func (e *journalEngine) status(ctx context.Context) (fairway.Partition, error) {
	st, err := e.leader.Status(ctx)
	if err != nil {
		return fairway.Partition{}, err
	}
	return fairway.Partition{
		Partition: int(st.Partition), Leader: st.Holder, Epoch: st.Epoch, LeaseLeftMS: st.Left.Milliseconds(),
		Database: e.store.Where(), Groups: st.Groups, Jobs: st.Jobs,
		UnpublishedRows: st.Unpublished, LagMS: st.Lag.Milliseconds(),
	}, nil
}

// partitions are the journal's partitions, each with its engine (its
// leader, its database), by number. Every coordinator follows every
// partition; the coordinator that leads the cluster (clusterLead) leads
// them all (followCluster), so that it answers every dispatch request
// and report: the executors need not know the partitions
// (docs/architecture.md, "Partitions").
type partitions []*journalEngine

// of is group's partition.
func (ps partitions) of(group string) *journalEngine {
	if len(ps) == 1 {
		return ps[0]
	}
	return ps[partition.Of(group, len(ps))]
}

// first is partition 0, in the home database but with
// database.partition-urls naming another.
func (ps partitions) first() *journalEngine { return ps[0] }

// databases are the partitions' databases, by partition.
func (ps partitions) databases() []*istore.Store {
	out := make([]*istore.Store, len(ps))
	for p, e := range ps {
		out[p] = e.store
	}
	return out
}

// stores are the partitions' databases, each once, the first's first.
func (ps partitions) stores() []*istore.Store {
	var out []*istore.Store
	for _, e := range ps {
		if !slices.Contains(out, e.store) {
			out = append(out, e.store)
		}
	}
	return out
}

// split groups the indexes of subs by their group's partition, in the
// order the partitions first appear (one group of all with one
// partition).
func (ps partitions) split(subs []fairway.Submission) [][]int {
	if len(ps) == 1 {
		all := make([]int, len(subs))
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	}
	at := map[*journalEngine]int{}
	var out [][]int
	for i, s := range subs {
		e := ps.of(s.Group)
		k, ok := at[e]
		if !ok {
			k = len(out)
			at[e] = k
			out = append(out, nil)
		}
		out[k] = append(out[k], i)
	}
	return out
}

// forgetLimits has every partition's claims read the concurrency limits
// again.
func (ps partitions) forgetLimits() {
	for _, e := range ps {
		e.limits.forget()
	}
}

// heldCounts are the jobs held by executors per task and per group, over
// the partitions (a group's are in its partition).
func (ps partitions) heldCounts(ctx context.Context) (tasks, groups map[string]int, err error) {
	tasks, groups = map[string]int{}, map[string]int{}
	for _, e := range ps {
		t, g, err := e.leader.HeldCounts(ctx)
		if err != nil {
			return nil, nil, err
		}
		for k, n := range t {
			tasks[k] += n
		}
		for k, n := range g {
			groups[k] += n
		}
	}
	return tasks, groups, nil
}

// insertFor is journalEngine.insertFor over the partitions: subs split by
// their group's partition, each part stored by its partition (one row
// each, the partitions at once: each is a commit of its own, and one after
// the other they made ingest a commit per partition slower, a tail of half
// a second at 3,000 jobs/s on four), the answers in subs' order. hand,
// when set, goes to the partition of the first submission it could run
// (one partition's leader hands over in its own transaction); when that
// one hands nothing, the caller puts the request back.
func (ps partitions) insertFor(ctx context.Context, subs []fairway.Submission, hand *parkedRequest) ([]istore.Inserted, []fairway.Job, error) {
	if len(ps) == 1 {
		return ps[0].insertFor(ctx, subs, hand)
	}
	byPart := map[*journalEngine][]int{}
	var order []*journalEngine
	var handTo *journalEngine
	for i, s := range subs {
		e := ps.of(s.Group)
		if _, ok := byPart[e]; !ok {
			order = append(order, e)
		}
		byPart[e] = append(byPart[e], i)
		if hand != nil && handTo == nil && slices.Contains(hand.req.Tasks, s.Task) {
			handTo = e
		}
	}
	out := make([]istore.Inserted, len(subs))
	var handed []fairway.Job
	err := inParallel(len(order), func(k int) error {
		e := order[k]
		at := byPart[e]
		part := make([]fairway.Submission, len(at))
		for j, i := range at {
			part[j] = subs[i]
		}
		var h *parkedRequest
		if e == handTo {
			h = hand
		}
		res, jobs, err := e.insertFor(ctx, part, h)
		if err != nil {
			return err // the parts stored are duplicates when sent again
		}
		if e == handTo {
			handed = jobs
		}
		for j, i := range at {
			out[i] = res[j]
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, handed, nil
}

// inParallel runs f(0) … f(n-1) at once, each partition's work being
// its own transactions (in its own database, or another partition's
// journal), and returns the first error by index.
func inParallel(n int, f func(k int) error) error {
	if n == 1 {
		return f(0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() { errs[k] = f(k) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// eligibleTTL is how long a partition's eligible weight for one kind of
// request (tasks and groups) is reused: a reading walks the state's
// counts.
const eligibleTTL = 20 * time.Millisecond

// eligibleReading is one reading of a partition's eligible weight.
type eligibleReading struct {
	weight float64
	at     time.Time
}

// forgetEligible drops the readings of eligible: a fold made jobs
// claimable, and a reading of none would keep a parked request from the
// partition until it ran out (a tail of a second at low load, seen in the
// bench's latency scenario on four partitions).
func (e *journalEngine) forgetEligible() {
	e.eligibleMu.Lock()
	clear(e.eligibleOf)
	e.eligibleMu.Unlock()
}

// eligible is the weight of the groups with work in this partition for
// an executor of tasks, granted groups (nil: all): journal.State.Eligible,
// read at most every eligibleTTL for the same tasks and groups.
func (e *journalEngine) eligible(tasks, groups []string) float64 {
	key := strings.Join(tasks, "\x00") + "\x01" + strings.Join(groups, "\x00")
	if groups == nil {
		key += "\x02" // every group, not none
	}
	e.eligibleMu.Lock()
	defer e.eligibleMu.Unlock()
	if r, ok := e.eligibleOf[key]; ok && time.Since(r.at) < cmp.Or(e.eligibleTTL, eligibleTTL) {
		return r.weight
	}
	var w float64
	e.leader.Follow(func(s *journal.State) { w = s.Eligible(tasks, groups) })
	if e.eligibleOf == nil || len(e.eligibleOf) > 1024 {
		e.eligibleOf = map[string]eligibleReading{}
	}
	e.eligibleOf[key] = eligibleReading{weight: w, at: time.Now()}
	return w
}

// spreadOf is the spread of instance's requests over the partitions
// (fairness.Spread), made at its first request.
func (d *dispatcher) spreadOf(app, instance string) *instanceSpread {
	d.spreadMu.Lock()
	defer d.spreadMu.Unlock()
	k := registrationKey{app, instance}
	if s, ok := d.spreads[k]; ok {
		return s
	}
	if d.spreads == nil || len(d.spreads) > 10000 {
		d.spreads = map[registrationKey]*instanceSpread{} // instances gone: their spreads start afresh
	}
	s := &instanceSpread{spread: fairness.NewSpread(len(d.parts))}
	d.spreads[k] = s
	return s
}

// instanceSpread is an instance's spread, one request at a time.
type instanceSpread struct {
	mu     sync.Mutex
	spread *fairness.Spread
	// unsure are claim ids, by partition, that may have claimed jobs for
	// this instance which it never got: a claim there failed (PostgreSQL
	// may have committed it before the connection broke), or the
	// partition was not served (not led, or its database unreachable)
	// when the request was answered under that id (an earlier try of it
	// may have claimed there). The instance asks
	// again under another id, so its next requests get them
	// (reclaimUnsure). At most maxUnsure a partition are kept, a failed
	// claim's before the others.
	unsure map[int][]unsureClaim
}

// unsureClaim is a claim id in instanceSpread.unsure; failed says a
// claim under it failed in the partition (not merely unled).
type unsureClaim struct {
	id     string
	failed bool
}

// maxUnsure bounds the unsure claim ids an instance keeps per partition.
const maxUnsure = 16

// markUnsure records claim id as unsure in partition part: failed, a
// claim under it failed there. A failed claim's id takes the place of
// the oldest unled one when the partition's are maxUnsure already.
func (is *instanceSpread) markUnsure(part int, id string, failed bool) {
	if is.unsure == nil {
		is.unsure = map[int][]unsureClaim{}
	}
	ids := is.unsure[part]
	if k := unsureIndex(ids, id); k >= 0 {
		ids[k].failed = ids[k].failed || failed
		return
	}
	if len(ids) >= maxUnsure {
		k := slices.IndexFunc(ids, func(u unsureClaim) bool { return !u.failed })
		if !failed || k < 0 {
			return
		}
		ids = slices.Delete(ids, k, k+1)
	}
	is.unsure[part] = append(ids, unsureClaim{id, failed})
}

// unsureIndex is where claim id is in ids, -1 if not there.
func unsureIndex(ids []unsureClaim, id string) int {
	return slices.IndexFunc(ids, func(u unsureClaim) bool { return u.id == id })
}

// forget drops claim id from partition part's unsure ids.
func (is *instanceSpread) forget(part int, id string) {
	ids := is.unsure[part]
	if k := unsureIndex(ids, id); k >= 0 {
		if ids = slices.Delete(ids, k, k+1); len(ids) == 0 {
			delete(is.unsure, part)
		} else {
			is.unsure[part] = ids
		}
	}
}

// reclaimUnsure hands an instance the jobs its unsure claims took, from
// the partitions this coordinator leads now, and forgets the ids it has
// an answer for. It asks the partition's leader, which first reads what
// an append of its that failed may have committed: its state, read
// straight, may not hold that claim yet (its database down since), and
// the id, taken for one that claimed nothing, was forgotten while its
// jobs stayed held by an instance that never got them.
func (is *instanceSpread) reclaimUnsure(ctx context.Context, d *dispatcher, p istore.ClaimParams) []fairway.Job {
	var jobs []fairway.Job
	for part, ids := range is.unsure {
		e := d.parts[part]
		if !e.serves() {
			continue
		}
		var left []unsureClaim
		for _, u := range ids {
			// A claim of none under the old id: the leader hands out
			// what it took, once it has read what a failed append of its
			// may have committed.
			q := istore.ClaimParams{Executor: p.Executor, Instance: p.Instance, ClaimID: u.id}
			got, unanswered, err := e.claimAnswered(ctx, q)
			if unanswered != nil || err != nil {
				left = append(left, u) // tried again at the next request
				continue
			}
			jobs = append(jobs, got...)
		}
		if len(left) == 0 {
			delete(is.unsure, part)
		} else {
			is.unsure[part] = left
		}
	}
	return jobs
}

// claimSpread claims for a request over the partitions: its slots spread
// by the instance's fairness.Spread over the partitions that have work
// for it, weighted by the weights of their groups with work (read from
// the states: this coordinator leads them all), each partition then
// picking by its own exact rules. A request sent again under its id (its
// answer was lost) gets what it claimed in every partition, and claims
// no more.
func (d *dispatcher) claimSpread(ctx context.Context, p istore.ClaimParams) ([]fairway.Job, error) {
	is := d.spreadOf(p.Executor, p.Instance)
	is.mu.Lock()
	defer is.mu.Unlock()
	if p.ClaimID != "" {
		key := journal.ClaimKey{Instance: journal.Instance{Executor: p.Executor, Instance: p.Instance}, Claim: p.ClaimID}
		var again []fairway.Job
		answered := make([]bool, len(d.parts))
		for i, e := range d.parts {
			if !e.serves() {
				continue // its id is kept for it (markUnserved)
			}
			var claimed bool
			e.leader.Follow(func(s *journal.State) { claimed = len(s.ClaimedBy(key)) > 0 })
			if !claimed {
				if e.leader.MayHoldClaim(key) {
					// An append of the leader's failed and was not read
					// back: a hand-over to this request among them, its
					// commit's answer lost. reclaimUnsure asks below,
					// the leader folding first; else the request was
					// answered with the others' jobs, its id dropped,
					// and that hand-over's jobs stayed held by an
					// instance that never got them.
					is.markUnsure(i, p.ClaimID, true)
				}
				continue
			}
			got, unanswered, err := e.claimAnswered(ctx, p)
			if err != nil {
				return again, err
			}
			answered[i] = unanswered == nil
			again = append(again, got...)
		}
		if len(again) > 0 {
			is.markUnserved(d, p.ClaimID, answered)
			return again, nil
		}
	}
	reclaimed := is.reclaimUnsure(ctx, d, p)
	if p.Limit -= len(reclaimed); p.Limit <= 0 {
		return reclaimed, nil
	}
	if p.MaxHeld > 0 {
		// What the instance holds over the partitions bounds the request;
		// each partition alone counts only its own.
		p.Limit = min(p.Limit, d.cluster.maxHeld(p.Executor, p.Instance, p.MaxHeld, -1))
		if p.MaxHeld = 0; p.Limit <= 0 {
			return reclaimed, nil
		}
	}
	answered := make([]bool, len(d.parts)) // the partitions that answered the request
	failed := make([]bool, len(d.parts))
	got, limited, err := d.claimRound(ctx, is, p, answered, failed)
	if err != nil && !limited && len(got) == 0 {
		// Every partition asked failed (one partition's database just
		// went down, and the request's few slots were all planned
		// there): the slots are planned again over the others, once.
		// Answered with the error instead, the executor paused its
		// requests for a second while the others had work (the bench's
		// partition-down scenario, the others' stalls at the cut).
		again, _, err2 := d.claimRound(ctx, is, p, answered, failed)
		got = again
		switch {
		case err2 != nil:
			err = errors.Join(err, err2) // what was claimed is handed out below
		case d.servesBut(failed):
			// What the others claimed is handed out, and if they had
			// nothing the request waits for work (parked) like any
			// other: the failed partition's claim id is kept for the
			// instance (markUnsure), as below.
			d.log.Warn("claiming in a partition failed; the request's slots were planned again over the others", "executor", p.Executor, "jobs", len(again), "error", err)
			err = nil
		}
	}
	jobs := append(reclaimed, got...)
	if err != nil && limited {
		if len(reclaimed) > 0 {
			return reclaimed, nil
		}
		return nil, err
	}
	if err != nil && len(jobs) > 0 {
		// What the others claimed is handed out; a partition that failed
		// (its database down) may have committed its claim all the same,
		// which its id, kept in claimRound, hands out at a next request.
		// Answered with the error instead, the executor never got the
		// others', and they stayed held by it, unstarted, until MaxHold
		// (an hour).
		d.log.Warn("claiming in a partition failed; handing out what the others claimed", "executor", p.Executor, "jobs", len(jobs), "error", err)
		err = nil
	}
	if err == nil {
		is.markUnserved(d, p.ClaimID, answered)
	}
	return jobs, err
}

// servesBut says whether this coordinator serves a partition but those
// in but.
func (d *dispatcher) servesBut(but []bool) bool {
	for i, e := range d.parts {
		if !but[i] && e.serves() {
			return true
		}
	}
	return false
}

// claimRound plans a request's slots over the partitions this coordinator
// serves, but those that failed already in this request (failed), and
// claims in each at once: the jobs they handed, the partitions that
// answered (set in answered) and failed (set in failed, their claim id
// kept as unsure), and the first error. limited says the error was the
// limits' read, before any claim.
func (d *dispatcher) claimRound(ctx context.Context, is *instanceSpread, p istore.ClaimParams, answered, failed []bool) (jobs []fairway.Job, limited bool, err error) {
	weights := make([]float64, len(d.parts))
	for i, e := range d.parts {
		if e.serves() && !failed[i] {
			weights[i] = e.eligible(p.Tasks, p.Groups)
		}
	}
	is.spread.Weigh(weights)
	plan := is.spread.Plan(p.Limit)
	var asked []int // the partitions asked, each claiming at once (a commit of its own)
	for i, n := range plan {
		if n > 0 {
			asked = append(asked, i)
		}
	}
	if len(asked) == 0 {
		return nil, false, nil
	}
	limits, err := d.cluster.limits(ctx)
	if err != nil {
		return nil, true, err
	}
	caps, release := d.cluster.split(limits, p, plan, false)
	got := make([][]fairway.Job, len(asked))
	err = inParallel(len(asked), func(k int) error {
		q := p
		q.Limit = plan[asked[k]]
		if caps != nil {
			q.TaskLimits = caps[asked[k]]
		}
		var unanswered, err error
		got[k], unanswered, err = d.parts[asked[k]].claimAnswered(ctx, q)
		answered[asked[k]] = answered[asked[k]] || unanswered == nil && err == nil
		failed[asked[k]] = err != nil
		return err
	})
	if caps != nil { // else nothing was reserved
		var claimed []fairway.Job
		for k := range asked {
			claimed = append(claimed, got[k]...)
		}
		release(claimed) // the claims have folded their rows: their jobs count held
	}
	for k, i := range asked {
		jobs = append(jobs, got[k]...)
		cost := float64(len(got[k]))
		if p.Fairness == FairnessTime {
			cost = d.parts[i].expectedSeconds(got[k])
		}
		is.spread.Served(i, fairness.Reply{Asked: plan[i], Handed: len(got[k]), Cost: cost, Competed: weights[i], Weight: weights[i]})
		if failed[i] && p.ClaimID != "" {
			is.markUnsure(i, p.ClaimID, true)
		}
	}
	return jobs, false, err
}

// markUnserved records claim id as unsure in the partitions this
// coordinator does not serve as it answers the request
// (journalEngine.serves) and that did not answer it. One that answered
// handed out every job the id ever claimed there, and its id is
// forgotten: kept, it handed them out again at a later request, and an
// executor that had run them meanwhile, its reports waiting for the
// database, ran them twice (the bench's partition-down scenario, a
// partition found unreachable between its claim and the answer).
func (is *instanceSpread) markUnserved(d *dispatcher, id string, answered []bool) {
	if id == "" {
		return
	}
	for i, e := range d.parts {
		switch {
		case answered[i]:
			is.forget(i, id)
		case !e.serves():
			is.markUnsure(i, id, false)
		}
	}
}

// expectedSeconds is what jobs are expected to run, as the partition's
// shares of time charge them (fairness.Book.CostMS): what a reply costs
// its partition in the executor's spread when shares count time. Charged
// one per job instead, a partition of long jobs took as many slots as one
// of short jobs, and its groups nine tenths of the time where they were
// owed half (the bench's shares scenario on four partitions).
func (e *journalEngine) expectedSeconds(jobs []fairway.Job) float64 {
	var ms float64
	e.leader.Follow(func(s *journal.State) {
		for _, j := range jobs {
			ms += s.Shares.CostMS(j.Group, j.Task)
		}
	})
	return ms / 1000
}
