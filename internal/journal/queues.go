package journal

import (
	"container/heap"
	"slices"
	"sort"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
)

// Queues is the leader's index of a State's claimable jobs (step 3 of
// docs/journal.md): per group, its due stuck jobs and its due waiting jobs
// of each priority, oldest first, per task; the jobs not due yet by their
// due time; and the groups in name order, for the round-robin walk. It is
// derived from the state, never saved: Rebuild makes it from a restored
// state, and Update keeps it up to date with the changes of each fold.
//
// Oldest first is journal order: the row that submitted a job, then its
// place in the row. It is the order of the jobs' submission times for
// jobs submitted by separate transactions, and for those of one batch
// (their times are the row's plus their place in it: submittedTime). A
// job retried by hand is submitted again, and goes to the back, though
// it keeps its first submission time.
//
// Entries are not removed when their job changes: an entry is checked
// against the job when it is read (the job claimable, in that list, due,
// of that age), and a stale one is dropped then. A job may have two valid
// entries (its priority changed and changed back); a claim reads each job
// once.
type Queues struct {
	s      *State
	groups map[string]*groupIndex
	// names are the names of groups, sorted (the round-robin order).
	names  []string
	timers *timerHeap
	// expiries are the jobs not held that expire (Job.ExpiresAt), soonest
	// first; an entry is dropped when read if its job has changed.
	expiries *timerHeap
	// triggers are the pending jobs that release themselves
	// (Job.Triggered) at RunAt, soonest first; checked when read too.
	triggers *timerHeap
	// reserved are the jobs claims picked whose claimed row is not folded
	// yet (see Claim).
	reserved map[fairway.JobRef]struct{}
	// bulk: Rebuild appends, and makes the heaps at its end.
	bulk bool
}

// The lists of a group.
const (
	listStuck = iota
	listHigh
	listLow
	lists
)

// groupIndex is one group's lists, each per task.
type groupIndex struct {
	lists [lists]map[string]*ageHeap
}

// entry is a job in a list: its age (Job.age) and its id (its group's
// is the list's: an entry is 24 bytes, for every waiting job).
type entry struct {
	age int64
	id  string
}

// list is the list a claimable job belongs to.
func (j *Job) list() int {
	switch {
	case j.State() == fairway.StateStuck:
		return listStuck
	case j.Priority() == string(fairway.PriorityHigh):
		return listHigh
	default:
		return listLow
	}
}

// NewQueues indexes s's claimable jobs (Rebuild), as of now (Unix µs).
func NewQueues(s *State, now int64) *Queues {
	q := &Queues{s: s}
	q.Rebuild(now)
	return q
}

// Rebuild indexes every claimable job of the state anew (after a restore).
func (q *Queues) Rebuild(now int64) {
	q.groups, q.names, q.timers, q.expiries, q.triggers, q.reserved = map[string]*groupIndex{}, nil, newTimerHeap(), newTimerHeap(), newTimerHeap(), nil
	// Appended, then each heap made at once: linear, where a push per
	// job is n log n (a takeover of a million waiting jobs).
	q.bulk = true
	for ref, j := range q.s.Jobs.All() {
		q.index(ref, j, now)
	}
	q.bulk = false
	heap.Init(q.timers)
	heap.Init(q.expiries)
	heap.Init(q.triggers)
	for _, g := range q.groups {
		for _, l := range g.lists {
			for _, h := range l {
				heap.Init(h)
			}
		}
	}
}

// Update indexes job ref as the state has it now: a job that became
// claimable goes into its list, or waits among the timers until due. Call
// it for every job a fold changed (Change.Job) and for every job whose
// priority a row set.
func (q *Queues) Update(ref fairway.JobRef, now int64) {
	if j := q.s.Jobs.Get(ref); j != nil {
		q.index(ref, j, now)
	}
}

// index puts job j in its list, or among the timers, if it is claimable,
// among the expiries if it expires and is not held, and among the
// triggers if it is pending and releases itself.
func (q *Queues) index(ref fairway.JobRef, j *Job, now int64) {
	if j.ExpiresAt() != 0 && !held(j.State()) {
		q.addTimer(q.expiries, timer{at: j.ExpiresAt(), ref: ref})
	}
	if j.Triggered() && j.State() == fairway.StatePending {
		q.addTimer(q.triggers, timer{at: j.RunAt, ref: ref})
	}
	if !claimable(j.State()) {
		return
	}
	if j.RunAt > now {
		q.addTimer(q.timers, timer{at: j.RunAt, ref: ref})
		return
	}
	q.push(ref, j)
}

// addTimer adds t to h (appended while Rebuild runs, which makes the
// heaps at its end).
func (q *Queues) addTimer(h *timerHeap, t timer) {
	if q.bulk {
		h.s = append(h.s, t)
		return
	}
	heap.Push(h, t)
}

// push puts job j in its list.
func (q *Queues) push(ref fairway.JobRef, j *Job) {
	g := q.groups[ref.Group]
	if g == nil {
		g = &groupIndex{}
		q.groups[ref.Group] = g
		i, _ := slices.BinarySearch(q.names, ref.Group)
		q.names = slices.Insert(q.names, i, ref.Group)
	}
	l := &g.lists[j.list()]
	if *l == nil {
		*l = map[string]*ageHeap{}
	}
	h := (*l)[j.Task]
	if h == nil {
		h = newAgeHeap()
		(*l)[j.Task] = h
	}
	if q.bulk {
		h.s = append(h.s, entry{age: j.age(), id: ref.ID})
		return
	}
	heap.Push(h, entry{age: j.age(), id: ref.ID})
}

// Due moves the jobs whose time came (now, Unix µs) from the timers to
// their lists.
func (q *Queues) Due(now int64) {
	for q.timers.Len() > 0 && q.timers.s[0].at <= now {
		t := heap.Pop(q.timers).(timer) //nolint:errcheck,forcetypeassert // the heap holds timers only
		if j := q.s.Jobs.Get(t.ref); j != nil && claimable(j.State()) && j.RunAt == t.at {
			q.push(t.ref, j)
		}
	}
}

// NextDue is the earliest time (Unix µs) a job among the timers comes
// due or a pending job releases itself (ok false when none waits): one
// that has since been claimed or changed may be among them, so the time
// may find nothing due.
func (q *Queues) NextDue() (at int64, ok bool) {
	for _, h := range []*timerHeap{q.timers, q.triggers} {
		if h.Len() > 0 && (!ok || h.s[0].at < at) {
			at, ok = h.s[0].at, true
		}
	}
	return at, ok
}

// TriggerDue says whether a pending job's time to release itself may
// have come at now (Triggered then finds which: an entry may be stale).
func (q *Queues) TriggerDue(now int64) bool {
	return q.triggers.Len() > 0 && q.triggers.s[0].at <= now
}

// Triggered returns up to limit pending jobs whose time to release
// themselves came (now, Unix µs): the leader releases them (a Release
// row).
func (q *Queues) Triggered(now int64, limit int) []fairway.JobRef {
	return q.popDue(q.triggers, now, limit, func(j *Job, at int64) bool {
		return j.Triggered() && j.State() == fairway.StatePending && j.RunAt == at
	})
}

// ExpiryDue says whether a job's expiry may have passed at now (Expired
// then finds which, if any: an entry may be stale).
func (q *Queues) ExpiryDue(now int64) bool {
	return q.expiries.Len() > 0 && q.expiries.s[0].at <= now
}

// Expired returns up to limit jobs whose expiry passed (now, Unix µs)
// and that no executor holds: the leader fails them (an Expired row).
func (q *Queues) Expired(now int64, limit int) []fairway.JobRef {
	return q.popDue(q.expiries, now, limit, func(j *Job, at int64) bool { return !held(j.State()) && j.ExpiresAt() == at })
}

// popDue pops the timers of h due at now, up to limit jobs for which
// valid says the timer still holds (a stale entry is dropped).
func (q *Queues) popDue(h *timerHeap, now int64, limit int, valid func(j *Job, at int64) bool) []fairway.JobRef {
	var out []fairway.JobRef
	var seen map[fairway.JobRef]bool // a job indexed twice is in the heap twice; made once one is due (this runs at every catch-up)
	for len(out) < limit && h.Len() > 0 && h.s[0].at <= now {
		t := heap.Pop(h).(timer) //nolint:errcheck,forcetypeassert // the heap holds timers only
		if j := q.s.Jobs.Get(t.ref); j != nil && valid(j, t.at) && !seen[t.ref] {
			if seen == nil {
				seen = map[fairway.JobRef]bool{}
			}
			seen[t.ref] = true
			out = append(out, t.ref)
		}
	}
	return out
}

// valid says whether e is still a job of list l of group, due at now.
func (q *Queues) valid(group string, e entry, l int, now int64) bool {
	ref := fairway.JobRef{Group: group, ID: e.id}
	j := q.s.Jobs.Get(ref)
	if j == nil || !claimable(j.State()) || j.list() != l || j.age() != e.age || j.RunAt > now {
		return false
	}
	_, reserved := q.reserved[ref]
	return !reserved
}

// head drops the stale entries at the top of h (list l of group) and
// returns the first valid one, if any.
func (q *Queues) head(group string, h *ageHeap, l int, now int64) (entry, bool) {
	for h.Len() > 0 {
		if e := h.s[0]; q.valid(group, e, l, now) {
			return e, true
		}
		heap.Pop(h)
	}
	return entry{}, false
}

// hasDue says whether group has a due job of one of tasks, dropping the
// stale entries it meets on the way and the lists they empty; empty is
// true when the group has no entries left (its caller removes it).
func (q *Queues) hasDue(group string, tasks []string, now int64) (found, empty bool) {
	g := q.groups[group]
	if g == nil {
		return false, true
	}
	empty = true
	for l := range g.lists {
		for task, h := range g.lists[l] {
			if _, ok := q.head(group, h, l, now); !ok {
				delete(g.lists[l], task)
				continue
			}
			empty = false
			found = found || slices.Contains(tasks, task)
		}
	}
	return found, empty
}

// Walk returns the groups with a due job of one of tasks, in round-robin
// order from the cursor (after it, then from the first name up to the
// cursor itself), at most n, leaving out capped and paused groups and,
// when granted is not nil, the groups not in it.
func (q *Queues) Walk(cursor string, n int, tasks, capped, granted []string, now int64) []string {
	var out, empty []string
	take := func(g string) bool {
		if len(out) >= n {
			return false
		}
		if slices.Contains(capped, g) || q.s.Paused[g] || (granted != nil && !slices.Contains(granted, g)) {
			return true
		}
		found, none := q.hasDue(g, tasks, now)
		if found {
			out = append(out, g)
		}
		if none {
			empty = append(empty, g)
		}
		return true
	}
	start := sort.SearchStrings(q.names, cursor)
	if start < len(q.names) && q.names[start] == cursor {
		start++
	}
	walk := func(names []string) bool {
		for _, g := range names {
			if !take(g) {
				return false
			}
		}
		return true
	}
	if walk(q.names[start:]) && cursor != "" {
		walk(q.names[:start])
	}
	// Groups left without entries leave the index, after the walk (which
	// read the names in place).
	for _, g := range empty {
		delete(q.groups, g)
		if i, ok := slices.BinarySearch(q.names, g); ok {
			q.names = slices.Delete(q.names, i, i+1)
		}
	}
	return out
}

// Candidates returns, for each of groups, up to share[i] of its due
// stuck jobs and of its due waiting jobs of each priority, of tasks,
// oldest first, each list marked as maybe longer when it filled its
// share: what the fair selection picks from.
func (q *Queues) Candidates(groups []string, share []int32, tasks []string, now int64) []*fairness.Queue {
	out := make([]*fairness.Queue, len(groups))
	for i, name := range groups {
		fq := &fairness.Queue{Name: name}
		out[i] = fq
		g := q.groups[name]
		if g == nil {
			continue
		}
		for l := range g.lists {
			cands, more := q.first(name, g, l, tasks, int(share[i]), now)
			switch l {
			case listStuck:
				fq.Stuck, fq.StuckMore = cands, more
			case listHigh:
				fq.High, fq.HighMore = cands, more
			default:
				fq.Low, fq.LowMore = cands, more
			}
		}
	}
	return out
}

// first returns the n oldest valid entries of list l of group g among
// tasks (merging the tasks' heaps), and whether n were found. It pops them
// and pushes them back: the index is unchanged, but for stale entries
// dropped.
func (q *Queues) first(group string, g *groupIndex, l int, tasks []string, n int, now int64) ([]fairness.Candidate, bool) {
	var heaps []*ageHeap
	for _, t := range tasks {
		if h := g.lists[l][t]; h != nil {
			heaps = append(heaps, h)
		}
	}
	var out []fairness.Candidate
	type popped struct {
		h *ageHeap
		e entry
	}
	var back []popped
	seen := map[string]bool{}
	for len(out) < n {
		var best *ageHeap
		for _, h := range heaps {
			if e, ok := q.head(group, h, l, now); ok && (best == nil || e.age < best.s[0].age) {
				best = h
			}
		}
		if best == nil {
			break
		}
		e := heap.Pop(best).(entry) //nolint:errcheck,forcetypeassert // the heap holds entries only
		back = append(back, popped{best, e})
		if seen[e.id] {
			continue // a second entry of one job
		}
		seen[e.id] = true
		j := q.s.Jobs.Get(fairway.JobRef{Group: group, ID: e.id})
		st := fairway.StateWaiting
		if l == listStuck {
			st = fairway.StateStuck
		}
		prio := fairway.PriorityLow
		if j.Priority() == string(fairway.PriorityHigh) {
			prio = fairway.PriorityHigh
		}
		out = append(out, fairness.Candidate{ID: e.id, Group: group, Task: j.Task, State: st, Priority: prio})
	}
	for _, p := range back {
		heap.Push(p.h, p.e)
	}
	return out, len(out) == n
}

// minHeap is a container/heap of T, least first by less.
type minHeap[T any] struct {
	s    []T
	less func(a, b T) bool
}

func (h *minHeap[T]) Len() int           { return len(h.s) }
func (h *minHeap[T]) Less(i, j int) bool { return h.less(h.s[i], h.s[j]) }
func (h *minHeap[T]) Swap(i, j int)      { h.s[i], h.s[j] = h.s[j], h.s[i] }
func (h *minHeap[T]) Push(x any)         { h.s = append(h.s, x.(T)) } //nolint:forcetypeassert // a T only
func (h *minHeap[T]) Pop() any {
	v := h.s[len(h.s)-1]
	h.s = h.s[:len(h.s)-1]
	return v
}

// ageHeap is a list's entries of one task, oldest first.
type ageHeap = minHeap[entry]

func newAgeHeap() *ageHeap {
	return &ageHeap{less: func(a, b entry) bool { return a.age < b.age }}
}

// timer is a claimable job that is not due yet.
type timer struct {
	at  int64
	ref fairway.JobRef
}

// timerHeap is the timers, soonest first.
type timerHeap = minHeap[timer]

func newTimerHeap() *timerHeap {
	return &timerHeap{less: func(a, b timer) bool { return a.at < b.at }}
}
