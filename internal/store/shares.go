package store

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

// Fair shares (scheduler.fairness, and group weights): the pure part.
//
// Counting jobs (FairnessJobs, every weight 1) is Docspell's rule, in
// pick: each group with an eligible job gets the next job in turn. Shares
// generalise it to weighted fair queueing, start-time fair queueing
// precisely (Goyal, Vin and Cheng, 1996): each group has a virtual time,
// its service so far divided by its weight, and the next job goes to the
// group whose virtual time is least; taking a job adds its cost divided
// by the group's weight. The cost is 1 when counting jobs, and the job's
// expected run time when sharing time (FairnessTime): measured per group
// and task from the jobs that ended (an average), and corrected when the
// job ends by the difference between what it ran and what it was charged.
// So two backlogged groups whose jobs take 10 minutes and 1 second get
// half the slot-time each, and a group of weight 3 three times the share
// of a group of weight 1.
//
// A group with nothing waiting accrues no credit: when it has an eligible
// job again, its virtual time is raised to the clock (the start tag of the
// last job taken), so it competes from now on, not from when it left.

// The fairness modes (scheduler.fairness).
const (
	// FairnessJobs: each turn is one job (the seeds' rule).
	FairnessJobs = "jobs"
	// FairnessTime: each group gets its weighted share of slot-time.
	FairnessTime = "time"
)

// DefaultCostMS is a job's expected run time when neither its group nor
// any group has run its task yet.
const DefaultCostMS = 1000

// shareState is what a claim with shares reads and writes under the
// fairness lock: the clock, the walked groups' virtual times and weights,
// and the expected costs.
type shareState struct {
	clock   float64
	vtime   map[string]float64 // walked groups; absent: not yet seen (the clock)
	weight  map[string]float64 // absent: 1
	costMS  map[[2]string]float64
	taskMS  map[string]float64 // a task's average over the groups that ran it
	byTime  bool               // FairnessTime: cost is the run time (seconds)
	changed map[string]bool    // groups whose virtual time moved
	read    map[string]bool    // groups whose rows this claim read
}

func newShareState(byTime bool) *shareState {
	return &shareState{vtime: map[string]float64{}, weight: map[string]float64{}, costMS: map[[2]string]float64{},
		taskMS: map[string]float64{}, byTime: byTime, changed: map[string]bool{}, read: map[string]bool{}}
}

func (s *shareState) weightOf(group string) float64 {
	if w, ok := s.weight[group]; ok && w > 0 {
		return w
	}
	return 1
}

// start is a group's virtual time as it competes now: never below the
// clock (no credit from when it had nothing waiting).
func (s *shareState) start(group string) float64 {
	v, ok := s.vtime[group]
	if !ok || v < s.clock {
		return s.clock
	}
	return v
}

// cost is what taking c charges its group, before the weight: 1 job, or
// its expected run time in seconds.
func (s *shareState) cost(c candidate) float64 {
	if !s.byTime {
		return 1
	}
	if ms, ok := s.costMS[[2]string{c.group, c.task}]; ok {
		return ms / 1000
	}
	if ms, ok := s.taskMS[c.task]; ok {
		return ms / 1000
	}
	return DefaultCostMS / 1000
}

// charge takes c for its group: the clock moves to the group's start tag,
// and the group's virtual time past it by the job's weighted cost.
func (s *shareState) charge(c candidate) {
	v := s.start(c.group)
	s.clock = v
	s.vtime[c.group] = v + s.cost(c)/s.weightOf(c.group)
	s.changed[c.group] = true
}

// pickShares is pick with shares: up to limit jobs from queues (the walked
// groups, in round-robin order after the cursor), each from the group
// whose virtual time is least (ties: the round-robin order), in it a due
// stuck job first, else the priority the counting scheme asks for, else
// the other. Limits pass groups and jobs over as in pick. more is true
// when it stopped because the next job depends on rows not fetched.
func pickShares(queues []*groupQueue, limit int, scheme fairway.CountingScheme, st *fairness, lim *limits, sh *shareState) (picked []candidate, more bool) {
	active := slices.Clone(queues)
	for len(picked) < limit && len(active) > 0 {
		best, bestV := -1, math.Inf(1)
		for i, q := range active {
			if v := sh.start(q.name); v < bestV {
				best, bestV = i, v
			}
		}
		q := active[best]
		if lim != nil && lim.groupLeft(q.name) == 0 {
			active = slices.Delete(active, best, best+1)
			continue
		}
		c, ok, unknown := q.take(scheme.At(st.counter), lim.allows)
		if unknown {
			return picked, true
		}
		if !ok {
			active = slices.Delete(active, best, best+1)
			continue
		}
		picked = append(picked, c)
		lim.took(c)
		sh.charge(c)
		st.cursor = q.name
		st.counter++
	}
	return picked, false
}

// runWeight is the weight of a job's run time in its group and task's
// average.
const runWeight = 0.2

// ended learns a job of group's task that ran ranMS: its group is charged
// the difference between that and what the job was charged when taken
// (the average then), and the average moves towards it.
func (s *shareState) ended(group, task string, ranMS float64) {
	if !s.byTime {
		return
	}
	key := [2]string{group, task}
	charged := s.cost(candidate{group: group, task: task}) * 1000
	if v, ok := s.vtime[group]; ok {
		s.vtime[group] = v + (ranMS-charged)/1000/s.weightOf(group)
		s.changed[group] = true
	}
	if avg, ok := s.costMS[key]; ok {
		s.costMS[key] = avg + runWeight*(ranMS-avg)
	} else {
		s.costMS[key] = ranMS
	}
}

// sharesWalk is how many groups a claim with shares walks at least: the
// next job goes to the least virtual time among them (with more groups
// than this waiting, among a window of them that moves round-robin).
const sharesWalk = 32

var (
	//go:embed sql/claim_shares.sql
	claimSharesSQL string
	//go:embed sql/claim_run_times.sql
	claimRunTimesSQL string
	//go:embed sql/claim_shares_save.sql
	claimSharesSaveSQL string
)

// queueRead returns what queues the read of the groups' virtual times and
// weights (those not read yet), and, sharing time, of their tasks' run
// times.
func (s *shareState) queueRead(groups, tasks []string) func(*pgx.Batch) {
	var unread []string
	for _, g := range groups {
		if !s.read[g] {
			s.read[g] = true
			unread = append(unread, g)
		}
	}
	return func(b *pgx.Batch) {
		if len(unread) == 0 {
			return
		}
		b.Queue(claimSharesSQL, unread).Query(func(rows pgx.Rows) error {
			var g string
			var w, v float64
			_, err := pgx.ForEachRow(rows, []any{&g, &w, &v}, func() error {
				s.weight[g], s.vtime[g] = w, v
				return nil
			})
			return err
		})
		if !s.byTime {
			return
		}
		b.Queue(claimRunTimesSQL, unread, tasks).Query(func(rows pgx.Rows) error {
			var g, t string
			var ms float64
			_, err := pgx.ForEachRow(rows, []any{&g, &t, &ms}, func() error {
				if g == "" {
					s.taskMS[t] = ms
				} else {
					s.costMS[[2]string{g, t}] = ms
				}
				return nil
			})
			return err
		})
	}
}

// save queues the write of the virtual times that moved, and of the clock
// (s may be nil: no shares).
func (s *shareState) save(b *pgx.Batch) {
	if s == nil || len(s.changed) == 0 {
		return
	}
	groups := make([]string, 0, len(s.changed))
	vtimes := make([]float64, 0, len(s.changed))
	for g := range s.changed {
		groups, vtimes = append(groups, g), append(vtimes, s.vtime[g])
	}
	b.Queue(claimSharesSaveSQL, groups, vtimes, s.clock)
}

//go:embed sql/learn_run_times.sql
var learnRunTimesSQL string

// Run is how long an attempt of a job ran.
type Run struct {
	Group, JobID string
	Ran          time.Duration
}

// LearnRunTimes records how long attempts ran, when fairness counts time:
// each group is charged what its jobs ran beyond what they were charged
// when taken (or credited what they ran less), and the averages that the
// next jobs are charged move towards the runs.
func (s *Store) LearnRunTimes(ctx context.Context, runs []Run) error {
	if len(runs) == 0 {
		return nil
	}
	groups, ids, ms := make([]string, len(runs)), make([]string, len(runs)), make([]float64, len(runs))
	for i, r := range runs {
		groups[i], ids[i], ms[i] = r.Group, r.JobID, float64(r.Ran)/float64(time.Millisecond)
	}
	if _, err := s.pool.Exec(ctx, learnRunTimesSQL, groups, ids, ms, runWeight); err != nil {
		return fmt.Errorf("learning the run times of %d attempts: %w", len(runs), interpretError(err))
	}
	return nil
}
