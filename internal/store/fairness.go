package store

import "github.com/fairwayhq/fairway"

// The pure part of fair selection: given each walked group's candidates,
// in round-robin order from the cursor, which jobs a claim takes and where
// the cursor and the counting scheme end. The database part (claim.go)
// walks the groups, fetches the candidates and marks the picked jobs.

// fairness is the shared selection state: the group the last job came from
// and the counting scheme's position.
type fairness struct {
	cursor  string
	counter int64
}

type candidate struct {
	id       string
	group    string
	task     string
	state    fairway.State
	priority fairway.Priority
}

// groupQueue holds one group's locked candidates, best first, and whether
// each list may have more rows than were fetched.
type groupQueue struct {
	name                         string
	stuck, high, low             []candidate
	stuckMore, highMore, lowMore bool
}

// shares is each of n groups' share of limit jobs if every group had
// enough: what to fetch of each. A group that runs out passes its turn on.
func shares(limit, n int) []int32 {
	share := make([]int32, n)
	for i := range limit {
		share[i%n]++
	}
	return share
}

// pick takes up to limit jobs from queues (the walked groups, in
// round-robin order after the cursor), one per group per turn: in each
// group a due stuck job first, else the priority the counting scheme asks
// for, else the other. It moves st on with each job. more is true when it
// stopped because the next job depends on rows not fetched: a list that
// was cut off, or, with walkCut, groups after the last one walked.
//
// lim (nil: none) are the concurrency limits: a group at its limit is
// passed over, and so is a job of a task at its limit, for the group's
// next job that none caps. A limit never leaves a slot idle that another
// eligible job could take.
func pick(queues []*groupQueue, limit int, walkCut bool, scheme fairway.CountingScheme, st *fairness, lim *limits) (picked []candidate, more bool) {
	active := queues
	for i := 0; len(picked) < limit && len(active) > 0; {
		if i == len(active) {
			if walkCut {
				return picked, true // groups after the last walked one are unknown
			}
			i = 0
		}
		q := active[i]
		if lim != nil && lim.groupLeft(q.name) == 0 {
			active = append(active[:i:i], active[i+1:]...)
			continue
		}
		c, ok, unknown := q.take(scheme.At(st.counter), lim.allows)
		if unknown {
			return picked, true
		}
		if !ok {
			active = append(active[:i:i], active[i+1:]...)
			continue
		}
		picked = append(picked, c)
		lim.took(c)
		st.cursor = q.name
		st.counter++
		i++
	}
	return picked, false
}

// take removes the group's next job for the priority hint that allowed
// accepts (jobs it refuses are dropped from the lists: this claim cannot
// take them). unknown is true when the answer depends on rows that were
// not fetched.
func (q *groupQueue) take(hint fairway.Priority, allowed func(candidate) bool) (c candidate, ok, unknown bool) {
	first, second := &q.high, &q.low
	firstMore, secondMore := q.highMore, q.lowMore
	if hint == fairway.PriorityLow {
		first, second = second, first
		firstMore, secondMore = secondMore, firstMore
	}
	for _, l := range []struct {
		list *[]candidate
		more bool
	}{{&q.stuck, q.stuckMore}, {first, firstMore}, {second, secondMore}} {
		for len(*l.list) > 0 {
			c = (*l.list)[0]
			*l.list = (*l.list)[1:]
			if allowed(c) {
				return c, true, false
			}
		}
		if l.more {
			return c, false, true
		}
	}
	return c, false, false
}
