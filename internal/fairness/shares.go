package fairness

import (
	"math"
	"slices"

	"github.com/fairwayhq/fairway"
)

// Fair shares (scheduler.fairness, and group weights): the pure part.
//
// Counting jobs (ByJobs, every weight 1) is Docspell's rule, in Pick:
// each group with an eligible job gets the next job in turn. Shares
// generalise it to weighted fair queueing, start-time fair queueing
// precisely (Goyal, Vin and Cheng, 1996): each group has a virtual time,
// its service so far divided by its weight, and the next job goes to the
// group whose virtual time is least; taking a job adds its cost divided
// by the group's weight. The cost is 1 when counting jobs, and the job's
// expected run time when sharing time (ByTime): measured per group and
// task from the jobs that ended (an average), and corrected when the job
// ends by the difference between what it ran and what it was charged. So
// two backlogged groups whose jobs take 10 minutes and 1 second get half
// the slot-time each, and a group of weight 3 three times the share of a
// group of weight 1.
//
// A group with nothing waiting accrues no credit: when it has an eligible
// job again, its virtual time is raised to the clock (the start tag of the
// last job taken), so it competes from now on, not from when it left.

// The fairness modes (scheduler.fairness).
const (
	// ByJobs: each turn is one job (the seeds' rule).
	ByJobs = "jobs"
	// ByTime: each group gets its weighted share of slot-time.
	ByTime = "time"
)

// DefaultCostMS is a job's expected run time when neither its group nor
// any group has run its task yet.
const DefaultCostMS = 1000

// RunWeight is the weight of a job's run time in its group and task's
// average.
const RunWeight = 0.2

// Shares is what a claim with shares reads and writes under the fairness
// lock: the clock, the walked groups' virtual times and weights, and the
// expected costs.
type Shares struct {
	clock   float64
	vtime   map[string]float64 // walked groups; absent: not yet seen (the clock)
	weight  map[string]float64 // absent: 1
	costMS  map[[2]string]float64
	taskMS  map[string]float64 // a task's average over the groups that ran it
	byTime  bool               // ByTime: cost is the run time (seconds)
	changed map[string]bool    // groups whose virtual time moved
	read    map[string]bool    // groups whose rows this claim read
}

// NewShares returns the state of a claim with shares, counting time
// (byTime) or jobs, whose clock was saved at clock.
func NewShares(byTime bool, clock float64) *Shares {
	return &Shares{clock: clock, vtime: map[string]float64{}, weight: map[string]float64{}, costMS: map[[2]string]float64{},
		taskMS: map[string]float64{}, byTime: byTime, changed: map[string]bool{}, read: map[string]bool{}}
}

// ByTime says whether the cost of a job is its expected run time (ByTime)
// rather than 1 (ByJobs).
func (s *Shares) ByTime() bool { return s.byTime }

// Clock is the start tag of the last job taken.
func (s *Shares) Clock() float64 { return s.clock }

// Unread returns those of groups whose weights, virtual times and run
// times this claim has not read yet, and counts them read.
func (s *Shares) Unread(groups []string) []string {
	var unread []string
	for _, g := range groups {
		if !s.read[g] {
			s.read[g] = true
			unread = append(unread, g)
		}
	}
	return unread
}

// SetWeight records group's weight as read (Weight counts one not above
// 0 as 1).
func (s *Shares) SetWeight(group string, weight float64) { s.weight[group] = weight }

// SetVTime records group's virtual time as read.
func (s *Shares) SetVTime(group string, vtime float64) { s.vtime[group] = vtime }

// SetCost records the average run time, in milliseconds, of task's jobs
// in group, or over the groups that ran it (group "").
func (s *Shares) SetCost(group, task string, ms float64) {
	if group == "" {
		s.taskMS[task] = ms
	} else {
		s.costMS[[2]string{group, task}] = ms
	}
}

// Changed returns the groups whose virtual times moved, with those
// virtual times: what to write back.
func (s *Shares) Changed() (groups []string, vtimes []float64) {
	groups = make([]string, 0, len(s.changed))
	vtimes = make([]float64, 0, len(s.changed))
	for g := range s.changed {
		groups, vtimes = append(groups, g), append(vtimes, s.vtime[g])
	}
	return groups, vtimes
}

// Weight is group's weight (1 unless it has one above 0).
func (s *Shares) Weight(group string) float64 {
	if w, ok := s.weight[group]; ok && w > 0 {
		return w
	}
	return 1
}

// Start is a group's virtual time as it competes now: never below the
// clock (no credit from when it had nothing waiting).
func (s *Shares) Start(group string) float64 {
	v, ok := s.vtime[group]
	if !ok || v < s.clock {
		return s.clock
	}
	return v
}

// Cost is what taking c charges its group, before the weight: 1 job, or
// its expected run time in seconds.
func (s *Shares) Cost(c Candidate) float64 {
	if !s.byTime {
		return 1
	}
	if ms, ok := s.costMS[[2]string{c.Group, c.Task}]; ok {
		return ms / 1000
	}
	if ms, ok := s.taskMS[c.Task]; ok {
		return ms / 1000
	}
	return DefaultCostMS / 1000
}

// Charge takes c for its group: the clock moves to the group's start tag,
// and the group's virtual time past it by the job's weighted cost.
func (s *Shares) Charge(c Candidate) {
	v := s.Start(c.Group)
	s.clock = v
	s.vtime[c.Group] = v + s.Cost(c)/s.Weight(c.Group)
	s.changed[c.Group] = true
}

// PickShares is Pick with shares: up to limit jobs from queues (the
// walked groups, in round-robin order after the cursor), each from the
// group whose virtual time is least (ties: the round-robin order), in it
// a due stuck job first, else the priority the counting scheme asks for,
// else the other. Limits pass groups and jobs over as in Pick. more is
// true when it stopped because the next job depends on rows not fetched.
func PickShares(queues []*Queue, limit int, scheme fairway.CountingScheme, st *Cursor, lim *Limits, sh *Shares) (picked []Candidate, more bool) {
	active := slices.Clone(queues)
	for len(picked) < limit && len(active) > 0 {
		best, bestV := -1, math.Inf(1)
		for i, q := range active {
			if v := sh.Start(q.Name); v < bestV {
				best, bestV = i, v
			}
		}
		q := active[best]
		if lim != nil && lim.GroupLeft(q.Name) == 0 {
			active = slices.Delete(active, best, best+1)
			continue
		}
		c, ok, unknown := q.Take(scheme.At(st.Counter), lim.Allows)
		if unknown {
			return picked, true
		}
		if !ok {
			active = slices.Delete(active, best, best+1)
			continue
		}
		picked = append(picked, c)
		lim.Took(c)
		sh.Charge(c)
		st.Group = q.Name
		st.Counter++
	}
	return picked, false
}

// Ended learns a job of group's task that ran ranMS: its group is charged
// the difference between that and what the job was charged when taken
// (the average then), and the average moves towards it.
func (s *Shares) Ended(group, task string, ranMS float64) {
	if !s.byTime {
		return
	}
	key := [2]string{group, task}
	charged := s.Cost(Candidate{Group: group, Task: task}) * 1000
	if v, ok := s.vtime[group]; ok {
		s.vtime[group] = v + (ranMS-charged)/1000/s.Weight(group)
		s.changed[group] = true
	}
	if avg, ok := s.costMS[key]; ok {
		s.costMS[key] = avg + RunWeight*(ranMS-avg)
	} else {
		s.costMS[key] = ranMS
	}
}
