package fairness

import "math"

// Spread is an executor's choice of the partition each of its free slots
// asks (issue 34): stride scheduling over the partitions, each weighted by
// the weights of its groups that have work the executor could take (the
// leader of the partition says so in each reply). Within a partition the
// leader's round-robin, counting scheme and shares stay exact; across
// partitions a group's part of the executor's slots is then about its
// weight over the weights of every group with work in the cluster, as one
// global round-robin would give it, up to the staleness of a partition's
// weight (learned at each reply from it) and the charge of one batch.
//
// A partition with nothing for the executor is not asked until a hint
// says work may be there (Woken), or the executor's periodic wakeup
// probes every such partition (Probe: a hint can be lost, and a limit
// that frees sends none). One that comes back starts at the least
// virtual time of those with work, as a flow joining weighted fair
// queueing does: no credit for the time it had nothing, and no debt from
// its last batch.
//
// The executor plans when none of its requests is in flight (Plan moves
// nothing; each request's Served charges it), as its one dispatch loop
// does.
type Spread struct {
	parts []spreadPart
	// served counts the replies, to break ties by the partition served
	// least recently.
	served uint64
	// clock is the least virtual time of the partitions with work, as
	// weighted fair queueing's system virtual time (it stays where it was
	// while none has any).
	clock float64
}

type spreadPart struct {
	// weight is the partition's eligible weight as last said (0: nothing
	// for this executor; unknown partitions are probed with weight 1).
	weight float64
	vtime  float64
	last   uint64
}

// Reply is what one partition's answer to a dispatch request says.
type Reply struct {
	// Asked and Handed are the jobs asked for and handed.
	Asked, Handed int
	// Cost is what the jobs handed cost: their number when shares count
	// jobs, their expected seconds when shares count time.
	Cost float64
	// Competed is the weight of the groups with work the executor could
	// take when the leader claimed (the reply is charged at it), and
	// Weight the weight left after the claim (0: nothing more).
	Competed, Weight float64
}

// NewSpread returns the spread of an executor over n partitions (at
// least 1), each probed once before it has said what it holds.
func NewSpread(n int) *Spread {
	s := &Spread{parts: make([]spreadPart, max(n, 1))}
	for i := range s.parts {
		s.parts[i].weight = 1
	}
	return s
}

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

// Served records partition p's reply. A reply that handed fewer jobs than
// asked had nothing more for this executor, whatever weight it says
// (groups held back by limits may still count there): it is not asked
// again until woken or probed. Values that are not finite and at least 0
// count as 0; a partition out of range is ignored.
func (s *Spread) Served(p int, r Reply) {
	if p < 0 || p >= len(s.parts) {
		return
	}
	cost, competed, weight := sane(r.Cost), sane(r.Competed), sane(r.Weight)
	if r.Handed < r.Asked {
		weight = 0
	}
	part := &s.parts[p]
	if part.weight <= 0 && (cost > 0 || weight > 0) {
		// A reply of a partition marked idle: it comes back first, so
		// that the charge below is not wiped by the return.
		part.vtime = s.clock
	}
	// Charged at the weight that competed, not the one planned with: a
	// partition probed at weight 1 that held 17 would otherwise be
	// charged 17 times what it took, and wait while the others caught up.
	w := competed
	if w <= 0 {
		w = part.weight
	}
	if w > 0 {
		part.vtime += cost / w
	}
	s.served++
	part.last = s.served
	part.weight = weight
	s.tick()
}

// Woken says work may be eligible in partition p (the leader's hint on
// fairway.notify.work): it is asked again, with weight 1 until its reply
// says more.
func (s *Spread) Woken(p int) {
	if p < 0 || p >= len(s.parts) || s.parts[p].weight > 0 {
		return
	}
	s.parts[p].weight, s.parts[p].vtime = 1, s.clock
	s.tick()
}

// Weigh sets every partition's eligible weight at once, where they are
// known rather than learned from replies (a coordinator that leads every
// partition reads them from their states): one that comes back from
// nothing starts at the clock, as Woken. Values that are not finite and
// at least 0 count as 0; weights beyond the partitions are ignored.
func (s *Spread) Weigh(weights []float64) {
	for p := range min(len(weights), len(s.parts)) {
		w := sane(weights[p])
		if s.parts[p].weight <= 0 && w > 0 {
			s.parts[p].vtime = s.clock
		}
		s.parts[p].weight = w
	}
	s.tick()
}

// Probe asks every partition with nothing again, as Woken does: the
// executor's periodic wakeup calls it, since a hint can be lost and a
// limit or a rate that frees sends none.
func (s *Spread) Probe() {
	for p := range s.parts {
		s.Woken(p)
	}
}

// tick moves the clock to the least virtual time of the partitions with
// work.
func (s *Spread) tick() {
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

// sane is v when it is finite and above 0, else 0.
func sane(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0
	}
	return v
}
