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

// MaxWeight bounds a group's weight.
const MaxWeight = 1000

// CheckWeight says what is wrong with a group's weight, if anything.
func CheckWeight(weight float64) error {
	if !(weight > 0 && weight <= MaxWeight) || math.IsNaN(weight) {
		return fairway.Invalid("weight", "%v: a weight is above 0 and at most %d (1 is the default)", weight, MaxWeight)
	}
	return nil
}

// RunWeight is the weight of a job's run time in its group and task's
// average.
const RunWeight = 0.2

// Book is what fair shares remember between claims: the clock (the start
// tag of the last job taken), the virtual time of each group charged or
// weighted so far (absent: it competes from the clock), the weights
// (absent: 1) and the average run times per group and task (group "": a
// task's over every group). The journal's leader keeps all of it in its
// state, moved by the rows it folds: a claimed job's
// charge (Charge), a weight set (SetWeight) and the run times of ended
// attempts (Learn), so that every reader of the journal holds the same.
type Book struct {
	Clock   float64
	VTimes  map[string]float64
	Weights map[string]float64
	RunMS   map[[2]string]float64
}

// NewBook is the book of a cluster where nothing ran yet.
func NewBook() *Book {
	return &Book{VTimes: map[string]float64{}, Weights: map[string]float64{}, RunMS: map[[2]string]float64{}}
}

// Weight is group's weight (1 unless it has one above 0).
func (b *Book) Weight(group string) float64 {
	if w, ok := b.Weights[group]; ok && w > 0 {
		return w
	}
	return 1
}

// Weighted says whether a group has a weight other than 1: then claims
// pick by virtual time even when counting jobs.
func (b *Book) Weighted() bool {
	for _, w := range b.Weights {
		if w != 1 {
			return true
		}
	}
	return false
}

// SetWeight sets group's weight; a group not seen yet starts at the
// clock, as one that had nothing waiting would.
func (b *Book) SetWeight(group string, weight float64) {
	b.Weights[group] = weight
	if _, ok := b.VTimes[group]; !ok {
		b.VTimes[group] = b.Clock
	}
}

// start is a group's virtual time as it competes now: never below the
// clock.
func (b *Book) start(group string) float64 {
	if v, ok := b.VTimes[group]; ok && v >= b.Clock {
		return v
	}
	return b.Clock
}

// Charge takes a job of group whose charge (its cost over its group's
// weight: Candidate.Charge) was step: the clock moves to the group's
// start tag, and the group's virtual time past it by step.
func (b *Book) Charge(group string, step float64) {
	v := b.start(group)
	b.Clock = v
	b.VTimes[group] = v + step
}

// CostMS is what a job of group's task is expected to run, in
// milliseconds: its group's average, else its task's over every group,
// else DefaultCostMS.
func (b *Book) CostMS(group, task string) float64 {
	if ms, ok := b.RunMS[[2]string{group, task}]; ok {
		return ms
	}
	if ms, ok := b.RunMS[[2]string{"", task}]; ok {
		return ms
	}
	return DefaultCostMS
}

// Ran is how long an ended attempt of a job of Group's Task ran.
type Ran struct {
	Group, Task string
	MS          float64
}

// Learn takes the run times of a batch of ended attempts, when fairness
// counts time: each group with a virtual time is charged what its jobs
// ran beyond the cost they were charged (the averages before the batch),
// over its weight (credited what they ran less); then each group's and
// task's average, and each task's over every group, move towards the
// batch's average of its runs, by RunWeight per run (the journal's fold
// calls it with the ends it folds).
func (b *Book) Learn(runs []Ran) {
	if len(runs) == 0 {
		return
	}
	type sum struct {
		n  int
		ms float64
	}
	sums := map[[2]string]*sum{}
	var keys [][2]string // in the order first seen: the same sums whatever the map's order
	for _, r := range runs {
		for _, k := range [][2]string{{r.Group, r.Task}, {"", r.Task}} {
			s := sums[k]
			if s == nil {
				s = &sum{}
				sums[k] = s
				keys = append(keys, k)
			}
			s.n++
			s.ms += r.MS
		}
	}
	diffs := map[string]float64{}
	var groups []string
	for _, k := range keys {
		if k[0] == "" {
			continue
		}
		s := sums[k]
		if _, ok := diffs[k[0]]; !ok {
			groups = append(groups, k[0])
		}
		diffs[k[0]] += s.ms - float64(s.n)*b.CostMS(k[0], k[1])
	}
	for _, g := range groups {
		if v, ok := b.VTimes[g]; ok {
			b.VTimes[g] = v + diffs[g]/1000/b.Weight(g)
		}
	}
	for _, k := range keys {
		s := sums[k]
		avg := s.ms / float64(s.n)
		if old, ok := b.RunMS[k]; ok {
			b.RunMS[k] = old + (1-math.Pow(1-RunWeight, float64(s.n)))*(avg-old)
		} else {
			b.RunMS[k] = avg
		}
	}
}

// Shares is what a claim with shares reads and moves: a book (the
// journal's state, which the claim does not write: the fold of its row
// does), the clock and the virtual times
// the claim's picks moved, and whether the cost is time or jobs.
type Shares struct {
	book   *Book
	clock  float64
	moved  map[string]float64 // groups charged by this claim
	byTime bool               // ByTime: cost is the run time (seconds)
	read   map[string]bool    // groups whose rows this claim read
}

// NewShares returns the state of a claim with shares, counting time
// (byTime) or jobs, whose clock was saved at clock, over a book of its
// own that the claim's reads fill (SetWeight, SetVTime, SetCost).
func NewShares(byTime bool, clock float64) *Shares {
	b := NewBook()
	b.Clock = clock
	return SharesOf(b, byTime)
}

// SharesOf returns the state of a claim with shares over book, which it
// reads and does not write.
func SharesOf(book *Book, byTime bool) *Shares {
	return &Shares{book: book, clock: book.Clock, moved: map[string]float64{}, byTime: byTime, read: map[string]bool{}}
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
func (s *Shares) SetWeight(group string, weight float64) { s.book.Weights[group] = weight }

// SetVTime records group's virtual time as read.
func (s *Shares) SetVTime(group string, vtime float64) { s.book.VTimes[group] = vtime }

// SetCost records the average run time, in milliseconds, of task's jobs
// in group, or over the groups that ran it (group "").
func (s *Shares) SetCost(group, task string, ms float64) { s.book.RunMS[[2]string{group, task}] = ms }

// Changed returns the groups whose virtual times moved, with those
// virtual times: what to write back.
func (s *Shares) Changed() (groups []string, vtimes []float64) {
	groups = make([]string, 0, len(s.moved))
	vtimes = make([]float64, 0, len(s.moved))
	for g, v := range s.moved {
		groups, vtimes = append(groups, g), append(vtimes, v)
	}
	return groups, vtimes
}

// Weight is group's weight (1 unless it has one above 0).
func (s *Shares) Weight(group string) float64 { return s.book.Weight(group) }

// Start is a group's virtual time as it competes now: never below the
// clock (no credit from when it had nothing waiting).
func (s *Shares) Start(group string) float64 {
	v, ok := s.moved[group]
	if !ok {
		v, ok = s.book.VTimes[group]
	}
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
	return s.book.CostMS(c.Group, c.Task) / 1000
}

// Charge takes c for its group: the clock moves to the group's start tag,
// and the group's virtual time past it by the job's weighted cost, which
// it returns (what Book.Charge is given for the same job).
func (s *Shares) Charge(c Candidate) float64 {
	v := s.Start(c.Group)
	step := s.Cost(c) / s.Weight(c.Group)
	s.clock = v
	s.moved[c.Group] = v + step
	return step
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
		c.Charge = sh.Charge(c)
		picked = append(picked, c)
		lim.Took(c)
		st.Group = q.Name
		st.Counter++
	}
	return picked, false
}
