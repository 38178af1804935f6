package coordinator

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	istore "github.com/fairwayhq/fairway/internal/store"
)

// Limits over the partitions (docs/architecture.md, "Partitions"). Each
// partition's leader counts the jobs held in its own state: a group's
// limit is exact there (a group lives in one partition), a task's is not,
// nor an executor's caps of a request (its free slots of a task with a
// max-concurrent) nor its max-held. A request asking several partitions
// at once, each allowed the whole, got up to the partitions' count times
// what it may. This coordinator leads every partition, so it counts them
// all: what is left of a task's limit over the cluster, and of the
// request's caps, is split over the partitions the request asks before
// they claim, and what the claims in flight may take of a task's limit
// is reserved until they end (each claim folds its row before it
// returns: the jobs it took are counted held by then).

// clusterLimits splits the task limits and the executors' caps over the
// partitions (nil with one partition: the partition's own count is
// exact).
type clusterLimits struct {
	parts partitions

	mu sync.Mutex
	// inflight are the jobs of a task's limit the claims in flight may
	// take, by task.
	inflight map[string]int
	// turn rotates which partition gets the last job of a split among
	// partitions asked alike, so that a limit of one alternates.
	turn int
}

// newClusterLimits counts the limits over parts; nil for one partition.
func newClusterLimits(parts partitions) *clusterLimits {
	if len(parts) < 2 {
		return nil
	}
	return &clusterLimits{parts: parts, inflight: map[string]int{}}
}

// heldElsewhere is what instance holds in the partitions but except.
func (c *clusterLimits) heldElsewhere(executor, instance string, except int) int {
	key := journal.Instance{Executor: executor, Instance: instance}
	n := 0
	for i, e := range c.parts {
		if i != except {
			e.leader.Follow(func(s *journal.State) { n += len(s.Held[key]) })
		}
	}
	return n
}

// heldTask is the jobs of task executors hold over the partitions.
func (c *clusterLimits) heldTask(task string) int {
	n := 0
	for _, e := range c.parts {
		e.leader.Follow(func(s *journal.State) { n += s.HeldTasks[task] })
	}
	return n
}

// split is what each partition may take of the tasks p asks for that a
// task limit (limits) or the request's caps (p.TaskLimits) bound, when
// partition i is asked plan[i] jobs: caps[i] is partition i's
// ClaimParams.TaskLimits (nil caps: nothing bounds them, each partition
// takes p's own). What is left of a task's limit goes to the partitions
// asked that have its work (journalEngine.eligible; with anyWork, every
// partition asked: a hand-over's, whose work is the batch it stores), in
// proportion to what they are asked. release ends the reservation of what
// the caps allow of the limits; call it once the claims have returned.
func (c *clusterLimits) split(limits []fairway.Limit, p istore.ClaimParams, plan []int, anyWork bool) (caps []map[string]int, release func()) {
	release = func() {}
	if c == nil {
		return nil, release
	}
	bounded := map[string]int{} // task → its limit over the cluster (-1: the request's cap alone)
	for _, t := range p.Tasks {
		if _, ok := p.TaskLimits[t]; ok {
			bounded[t] = -1
		}
	}
	for _, l := range limits {
		if l.Kind == "task" && slices.Contains(p.Tasks, l.Name) {
			bounded[l.Name] = l.Max
		}
	}
	if len(bounded) == 0 {
		return nil, release
	}
	caps = make([]map[string]int, len(c.parts))
	for i, n := range plan {
		if n > 0 {
			caps[i] = maps.Clone(p.TaskLimits)
			if caps[i] == nil {
				caps[i] = map[string]int{}
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	reserved := map[string]int{}
	c.turn++
	for _, t := range slices.Sorted(maps.Keys(bounded)) {
		left := -1
		if limit := bounded[t]; limit >= 0 {
			left = max(limit-c.heldTask(t)-c.inflight[t], 0)
		}
		if own, ok := p.TaskLimits[t]; ok && (left < 0 || own < left) {
			left = max(own, 0)
		}
		got := c.share(t, left, p.Groups, plan, anyWork)
		for i, n := range got {
			if caps[i] != nil {
				caps[i][t] = n
			}
			if bounded[t] >= 0 {
				reserved[t] += n
			}
		}
	}
	for t, n := range reserved {
		c.inflight[t] += n
	}
	return caps, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for t, n := range reserved {
			if c.inflight[t] -= n; c.inflight[t] <= 0 {
				delete(c.inflight, t)
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
