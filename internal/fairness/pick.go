// Package fairness is the pure part of fair selection: given each walked
// group's candidates, in round-robin order from the cursor, which jobs a
// claim takes and where the cursor and the counting scheme end, under the
// concurrency and rate limits and, with shares, by the groups' virtual
// times. The database part (internal/store, claim.go) walks the groups,
// fetches the candidates, reads and writes the state kept here, and marks
// the picked jobs.
package fairness

import "github.com/fairwayhq/fairway"

// Split is each of n groups' share of limit jobs if every group had
// enough: what to fetch of each. A group that runs out passes its turn on.
func Split(limit, n int) []int32 {
	share := make([]int32, n)
	for i := range limit {
		share[i%n]++
	}
	return share
}

// Pick takes up to limit jobs from queues (the walked groups, in
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
func Pick(queues []*Queue, limit int, walkCut bool, scheme fairway.CountingScheme, st *Cursor, lim *Limits) (picked []Candidate, more bool) {
	active := queues
	for i := 0; len(picked) < limit && len(active) > 0; {
		if i == len(active) {
			if walkCut {
				return picked, true // groups after the last walked one are unknown
			}
			i = 0
		}
		q := active[i]
		if lim != nil && lim.GroupLeft(q.Name) == 0 {
			active = append(active[:i:i], active[i+1:]...)
			continue
		}
		c, ok, unknown := q.Take(scheme.At(st.Counter), lim.Allows)
		if unknown {
			return picked, true
		}
		if !ok {
			active = append(active[:i:i], active[i+1:]...)
			continue
		}
		picked = append(picked, c)
		lim.Took(c)
		st.Group = q.Name
		st.Counter++
		i++
	}
	return picked, false
}
