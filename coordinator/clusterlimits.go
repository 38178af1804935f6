package coordinator

import (
	"cmp"
	"context"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
	"github.com/fairwayhq/fairway/internal/journal"
	istore "github.com/fairwayhq/fairway/internal/store"
)

// Limits over the partitions (docs/architecture.md, "Partitions"). Each
// partition's leader counts the jobs held in its own state: a group's
// limit and rate are exact there (a group lives in one partition), a
// task's are not, nor an executor's caps of a request (its free slots of
// a task with a max-concurrent) nor its max-held. A request asking
// several partitions at once, each allowed the whole, got up to the
// partitions' count times what it may. This coordinator leads every
// partition, so it counts them all: what is left of a task's limit over
// the cluster, of its rate's tokens, and of the request's caps, is split
// over the partitions the request asks before they claim, and what the
// claims in flight may take of a task's limit and tokens is reserved
// until they end (each claim folds its row before it returns: the jobs
// it took are counted held by then, and take their tokens).

// clusterLimits splits the task limits, the tasks' rates and the
// executors' caps over the partitions (nil with one partition: the
// partition's own count is exact).
type clusterLimits struct {
	parts partitions
	// notify wakes the parked dispatch requests: a task's rate refilled
	// a token they may take.
	notify func()

	mu sync.Mutex
	// inflight are the jobs of a task's limit the claims in flight may
	// take, by task; rateInflight those of its rate's tokens.
	inflight, rateInflight map[string]int
	// buckets are the tasks' rates over the cluster, by task: each
	// partition's own bucket counts only its starts, and so lets the
	// whole rate start in each. Kept in this coordinator's memory (it
	// leads every partition); a new one starts from the emptiest
	// partition's bucket, which holds at least the cluster's tokens.
	buckets map[string]*clusterBucket
	// wakeAt is when the wake for a rate's next token is due (zero:
	// none pending).
	wakeAt time.Time
	// turn rotates which partition gets the last job of a split among
	// partitions asked alike, so that a limit of one alternates.
	turn int

	// lastMu guards last: what each partition's state said at the last
	// read of it, by partition and reading, which stands for what it says
	// while it does not answer (partitionCounts.read).
	lastMu sync.Mutex
	last   []map[string]float64
}

// maxLast bounds the readings kept of a partition.
const maxLast = 10000

// read is f of partition i's state, read now when the partition answers
// (journalEngine.answers); else what it was at the last read under key
// (0 if never read): a partition whose database is frozen holds its
// lock over a fold that waits for it, and its held jobs are still held
// (their executors run them), so its last counts stand for it.
func (c *clusterLimits) read(i int, key string, f func(*journal.State) float64) float64 {
	e := c.parts[i]
	c.lastMu.Lock()
	defer c.lastMu.Unlock()
	if c.last == nil {
		c.last = make([]map[string]float64, len(c.parts))
	}
	if !e.answers() {
		return c.last[i][key]
	}
	var v float64
	if !e.leader.Follow(func(s *journal.State) { v = f(s) }) {
		return c.last[i][key]
	}
	if c.last[i] == nil || len(c.last[i]) > maxLast {
		c.last[i] = map[string]float64{}
	}
	c.last[i][key] = v
	return v
}

// clusterBucket is a task's rate over the cluster: its tokens as of at.
type clusterBucket struct {
	limit  fairness.RateLimit
	tokens float64
	at     time.Time
}

// refill brings b to now.
func (b *clusterBucket) refill(now time.Time) {
	b.tokens, b.at = b.limit.Refilled(b.tokens, now.Sub(b.at).Seconds()), now
}

// newClusterLimits counts the limits over parts; nil for one partition.
func newClusterLimits(parts partitions, notify func()) *clusterLimits {
	if len(parts) < 2 {
		return nil
	}
	return &clusterLimits{parts: parts, notify: notify, inflight: map[string]int{}, rateInflight: map[string]int{}, buckets: map[string]*clusterBucket{}}
}

// heldElsewhere is what instance holds in the partitions but except.
func (c *clusterLimits) heldElsewhere(executor, instance string, except int) int {
	key := journal.Instance{Executor: executor, Instance: instance}
	n := 0
	for i := range c.parts {
		if i != except {
			n += int(c.read(i, "held\x00"+executor+"\x00"+instance, func(s *journal.State) float64 { return float64(len(s.Held[key])) }))
		}
	}
	return n
}

// heldTask is the jobs of task executors hold over the partitions.
func (c *clusterLimits) heldTask(task string) int {
	n := 0
	for i := range c.parts {
		n += int(c.read(i, "task\x00"+task, func(s *journal.State) float64 { return float64(s.HeldTasks[task]) }))
	}
	return n
}

// bucket is task's rate over the cluster as of now, nil when it has
// none (the partitions' states say: a rate is set on each). Called with
// c.mu held.
func (c *clusterLimits) bucket(task string, now time.Time) *clusterBucket {
	var (
		limit  fairness.RateLimit
		tokens = math.Inf(1)
		found  bool
	)
	for _, e := range c.parts {
		if !e.answers() {
			continue // its bucket holds at least the cluster's tokens: the others' bound them
		}
		e.leader.Follow(func(s *journal.State) {
			if t, l, ok := s.Rates.TaskTokens(task, e.leader.Now().UnixMicro()); ok {
				limit, found, tokens = l, true, math.Min(tokens, t)
			}
		})
	}
	b := c.buckets[task]
	switch {
	case !found:
		delete(c.buckets, task)
		return nil
	case b == nil:
		b = &clusterBucket{limit: limit, tokens: tokens, at: now}
		c.buckets[task] = b
	case b.limit != limit:
		b.limit = limit // changed: a lower limit caps the tokens at the refill
	}
	b.refill(now)
	return b
}

// wakeFor has the parked requests woken when b gains its next token
// (once: the earliest such time pending). Called with c.mu held.
func (c *clusterLimits) wakeFor(b *clusterBucket, now time.Time) {
	need := math.Floor(b.tokens) + 1 - b.tokens
	at := now.Add(time.Duration(need * float64(b.limit.Period) / b.limit.Starts))
	if !c.wakeAt.IsZero() && !at.Before(c.wakeAt) {
		return
	}
	c.wakeAt = at
	time.AfterFunc(at.Sub(now), func() {
		c.mu.Lock()
		if c.wakeAt.Equal(at) {
			c.wakeAt = time.Time{}
		}
		c.mu.Unlock()
		if c.notify != nil {
			c.notify()
		}
	})
}

// ratedTasks are the tasks of tasks with a rate over the cluster, as the
// first partition's state says (a task's rate is set on every
// partition).
func (c *clusterLimits) ratedTasks(tasks []string) []string {
	var out []string
	c.parts[0].leader.Follow(func(s *journal.State) {
		if s.Rates.Empty() {
			return
		}
		for _, t := range tasks {
			if _, ok := s.Rates.Limits[[2]string{t, ""}]; ok {
				out = append(out, t)
			}
		}
	})
	return out
}

// split is what each partition may take of the tasks p asks for that a
// task limit (limits), a task's rate or the request's caps
// (p.TaskLimits) bound, when partition i is asked plan[i] jobs: caps[i]
// is partition i's ClaimParams.TaskLimits (nil caps: nothing bounds
// them, each partition takes p's own). What is left of a task's limit
// and its rate goes to the partitions asked that have its work
// (journalEngine.eligible; with anyWork, every partition asked: a
// hand-over's, whose work is the batch it stores), in proportion to what
// they are asked. release, once the claims have returned with the jobs
// claimed, ends the reservations and takes the rates' tokens.
func (c *clusterLimits) split(limits []fairway.Limit, p istore.ClaimParams, plan []int, anyWork bool) (caps []map[string]int, release func(claimed []fairway.Job)) {
	release = func([]fairway.Job) {}
	if c == nil {
		return nil, release
	}
	limitOf := map[string]int{}
	for _, l := range limits {
		if l.Kind == "task" && slices.Contains(p.Tasks, l.Name) {
			limitOf[l.Name] = l.Max
		}
	}
	rated := c.ratedTasks(p.Tasks)
	if len(limitOf) == 0 && len(rated) == 0 && !slices.ContainsFunc(p.Tasks, func(t string) bool { _, ok := p.TaskLimits[t]; return ok }) {
		return nil, release // the usual request: nothing to count over the partitions
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	type bound struct {
		limit  bool           // a concurrency limit counts
		bucket *clusterBucket // a rate counts
	}
	bounded := map[string]bound{}
	for _, t := range p.Tasks {
		_, limited := limitOf[t]
		_, capped := p.TaskLimits[t]
		var b *clusterBucket
		if slices.Contains(rated, t) {
			b = c.bucket(t, now)
		}
		if limited || capped || b != nil {
			bounded[t] = bound{limit: limited, bucket: b}
		}
	}
	caps = make([]map[string]int, len(c.parts))
	total := 0
	for i, n := range plan {
		if n > 0 {
			total += n
			caps[i] = maps.Clone(p.TaskLimits)
			if caps[i] == nil {
				caps[i] = map[string]int{}
			}
		}
	}
	reserved, taking := map[string]int{}, map[string]int{}
	c.turn++
	for _, t := range slices.Sorted(maps.Keys(bounded)) {
		bd := bounded[t]
		left := total
		if bd.limit {
			left = min(left, max(limitOf[t]-c.heldTask(t)-c.inflight[t], 0))
		}
		if own, ok := p.TaskLimits[t]; ok {
			left = min(left, max(own, 0))
		}
		if b := bd.bucket; b != nil {
			tokens := max(int(math.Floor(b.tokens))-c.rateInflight[t], 0)
			if tokens < left {
				left = tokens
				c.wakeFor(b, now) // a claim may take more once a token comes
			}
		}
		for i, n := range c.share(t, left, p.Groups, plan, anyWork) {
			if caps[i] != nil {
				caps[i][t] = n
			}
			if bd.limit {
				reserved[t] += n
			}
			if bd.bucket != nil {
				taking[t] += n
			}
		}
	}
	for t, n := range reserved {
		c.inflight[t] += n
	}
	for t, n := range taking {
		c.rateInflight[t] += n
	}
	return caps, func(claimed []fairway.Job) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for t, n := range reserved {
			if c.inflight[t] -= n; c.inflight[t] <= 0 {
				delete(c.inflight, t)
			}
		}
		if len(taking) == 0 {
			return
		}
		now := time.Now()
		for t, n := range taking {
			if c.rateInflight[t] -= n; c.rateInflight[t] <= 0 {
				delete(c.rateInflight, t)
			}
			if b := c.buckets[t]; b != nil {
				b.refill(now)
				for _, j := range claimed {
					if j.Task == t {
						b.tokens--
					}
				}
			}
		}
	}
}

// share splits left jobs of task over the partitions asked (plan) that
// have its work for groups (all of them with anyWork): each what it is asked when left covers them
// all, else in proportion to what it is asked, by the largest
// remainders, the ties to the partitions in turn.
func (c *clusterLimits) share(task string, left int, groups []string, plan []int, anyWork bool) []int {
	got := make([]int, len(plan))
	asked, total := []int{}, 0
	for i, n := range plan {
		if n > 0 && (anyWork || c.parts[i].eligible([]string{task}, groups) > 0) {
			asked = append(asked, i)
			total += n
		}
	}
	if total <= left {
		for _, i := range asked {
			got[i] = plan[i]
		}
		return got
	}
	given := 0
	for _, i := range asked {
		got[i] = left * plan[i] / total
		given += got[i]
	}
	// The rest, one each, by the largest remainder; among equal ones the
	// turn's partition first.
	order := slices.Clone(asked)
	n, turn := len(plan), c.turn%len(plan)
	slices.SortStableFunc(order, func(a, b int) int {
		ra, rb := left*plan[a]%total, left*plan[b]%total
		if ra != rb {
			return cmp.Compare(rb, ra)
		}
		return cmp.Compare((a-turn+n)%n, (b-turn+n)%n)
	})
	for _, i := range order[:left-given] {
		got[i]++
	}
	return got
}

// handOver is what a hand-over in partition part may take for r: the
// request's caps and the task limits left over the cluster, all for that
// partition, and r's max-held less what its instance holds in the others
// (nil c: r's own); release as split's.
func (c *clusterLimits) handOver(limits []fairway.Limit, r *parkedRequest, part int16) (taskCaps map[string]int, maxHeld int, release func([]fairway.Job)) {
	req := r.req
	if c == nil {
		return req.TaskSlots, r.maxHeld, func([]fairway.Job) {}
	}
	plan := make([]int, len(c.parts))
	plan[part] = req.Slots
	caps, release := c.split(limits, istore.ClaimParams{Tasks: req.Tasks, Groups: req.Groups, TaskLimits: req.TaskSlots}, plan, true)
	taskCaps = req.TaskSlots
	if caps != nil {
		taskCaps = caps[part]
	}
	return taskCaps, c.maxHeld(req.Executor, req.Instance, r.maxHeld, int(part)), release
}

// maxHeld is what instance may hold in partition except, of maxHeld
// over the partitions (0: no bound): less what it holds in the others.
func (c *clusterLimits) maxHeld(executor, instance string, maxHeld, except int) int {
	if c == nil || maxHeld <= 0 {
		return maxHeld
	}
	return maxHeld - c.heldElsewhere(executor, instance, except)
}

// limits are the operators' concurrency limits, as the claims read them
// (partition 0's cache: every partition reads the home database's).
func (c *clusterLimits) limits(ctx context.Context) ([]fairway.Limit, error) {
	if c == nil {
		return nil, nil
	}
	return c.parts[0].limits.get(ctx)
}
