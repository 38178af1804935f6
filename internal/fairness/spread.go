package fairness

import "cmp"

// Spread is an executor's choice of the partition each of its free slots
// asks (issue 34): stride scheduling over the partitions, each weighted by
// the weights of its groups that have work the executor could take (the
// leader of the partition says so in each reply). Within a partition the
// leader's round-robin, counting scheme and shares stay exact; across
// partitions a group's part of the executor's slots is then its weight
// over the weights of every group with work in the cluster, as one global
// round-robin would give it, up to the staleness of a partition's weight
// (learned at each reply from it) and the charge of one job.
//
// A partition with no eligible work is not asked until a hint says work
// may be there (Woken); one that comes back starts at the least virtual
// time of those with work, as a flow joining weighted fair queueing does,
// so that its idle time is not credit it would spend ahead of the others.
type Spread struct {
	parts []spreadPart
	// served counts the replies, to break ties by the partition served
	// least recently.
	served uint64
	// clock is the least virtual time of the partitions with work, as
	// weighted fair queueing's system virtual time: a partition that
	// comes back from idle starts there.
	clock float64
}

type spreadPart struct {
	// weight is the partition's eligible weight as last said (0: nothing
	// eligible; unknown partitions are probed with weight 1).
	weight float64
	vtime  float64
	last   uint64
}

// NewSpread returns the spread of an executor over n partitions, each
// probed once before it has said what it holds.
func NewSpread(n int) *Spread {
	s := &Spread{parts: make([]spreadPart, n)}
	for i := range s.parts {
		s.parts[i].weight = 1
	}
	return s
}

// Partitions is how many partitions s spreads over.
func (s *Spread) Partitions() int { return len(s.parts) }

// Plan spreads k free slots over the partitions with eligible work: how
// many jobs to ask of each (indexed by partition; all 0 when none has
// work). It moves nothing: Served charges what each reply handed.
func (s *Spread) Plan(k int) []int {
	out := make([]int, len(s.parts))
	vt := make([]float64, len(s.parts))
	for i, p := range s.parts {
		vt[i] = p.vtime
	}
	for range k {
		best := -1
		for i, p := range s.parts {
			if p.weight <= 0 {
				continue
			}
			if best < 0 || vt[i] < vt[best] || (vt[i] == vt[best] && p.last < s.parts[best].last) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		out[best]++
		vt[best] += 1 / s.parts[best].weight
	}
	return out
}

// Served records partition p's reply: it handed jobs costing cost (their
// number when shares count jobs; their expected seconds when shares count
// time) from groups whose weights sum to competed (those with work the
// executor could take when it claimed), and weight is its eligible weight
// after the claim (0: nothing more the executor could take).
func (s *Spread) Served(p int, cost, competed, weight float64) {
	part := &s.parts[p]
	// Charged at the weight that competed, not the one planned with: a
	// partition probed at weight 1 that held 17 would otherwise be
	// charged 17 times what it took, and wait while the others caught up.
	if w := cmp.Or(max(competed, 0), part.weight); w > 0 {
		part.vtime += cost / w
	}
	s.served++
	part.last = s.served
	s.setWeight(p, weight)
}

// Woken says work may be eligible in partition p (the leader's hint on
// fairway.notify.work): it is asked again, with weight 1 until its reply
// says more.
func (s *Spread) Woken(p int) {
	if s.parts[p].weight <= 0 {
		s.setWeight(p, 1)
	}
}

func (s *Spread) setWeight(p int, weight float64) {
	part := &s.parts[p]
	if part.weight <= 0 && weight > 0 {
		// Back from idle: no credit for the time it had nothing, and no
		// debt either (its last batch, charged at the weight of its last
		// group, would make it wait behind partitions that came back
		// with it).
		part.vtime = s.clock
	}
	part.weight = max(weight, 0)
	// The clock is the least virtual time of the partitions with work (it
	// stays where it was while none has any).
	least, any := 0.0, false
	for _, q := range s.parts {
		if q.weight > 0 && (!any || q.vtime < least) {
			least, any = q.vtime, true
		}
	}
	if any {
		s.clock = max(s.clock, least)
	}
}
