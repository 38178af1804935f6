package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway/internal/fairness"
	"github.com/jackc/pgx/v5"
)

// Fair shares (scheduler.fairness, and group weights): the pure part, the
// rules, is in internal/fairness (shares.go); this is the database part,
// which reads the groups' weights, virtual times and run times into a
// claim's fairness.Shares and writes back what moved.

// The fairness modes (scheduler.fairness).
const (
	// FairnessJobs: each turn is one job (the seeds' rule).
	FairnessJobs = fairness.ByJobs
	// FairnessTime: each group gets its weighted share of slot-time.
	FairnessTime = fairness.ByTime
)

// DefaultCostMS is a job's expected run time when neither its group nor
// any group has run its task yet.
const DefaultCostMS = fairness.DefaultCostMS

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

// queueSharesRead returns what queues the read of the groups' virtual
// times and weights (those not read yet), and, sharing time, of their
// tasks' run times.
func queueSharesRead(s *fairness.Shares, groups, tasks []string) func(*pgx.Batch) {
	unread := s.Unread(groups)
	return func(b *pgx.Batch) {
		if len(unread) == 0 {
			return
		}
		b.Queue(claimSharesSQL, unread).Query(func(rows pgx.Rows) error {
			var g string
			var w, v float64
			_, err := pgx.ForEachRow(rows, []any{&g, &w, &v}, func() error {
				s.SetWeight(g, w)
				s.SetVTime(g, v)
				return nil
			})
			return err
		})
		if !s.ByTime() {
			return
		}
		b.Queue(claimRunTimesSQL, unread, tasks).Query(func(rows pgx.Rows) error {
			var g, t string
			var ms float64
			_, err := pgx.ForEachRow(rows, []any{&g, &t, &ms}, func() error {
				s.SetCost(g, t, ms)
				return nil
			})
			return err
		})
	}
}

// saveShares queues the write of the virtual times that moved, and of
// the clock (s may be nil: no shares).
func saveShares(b *pgx.Batch, s *fairness.Shares) {
	if s == nil {
		return
	}
	groups, vtimes := s.Changed()
	if len(groups) == 0 {
		return
	}
	b.Queue(claimSharesSaveSQL, groups, vtimes, s.Clock())
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
	if _, err := s.pool.Exec(ctx, learnRunTimesSQL, groups, ids, ms, fairness.RunWeight); err != nil {
		return fmt.Errorf("learning the run times of %d attempts: %w", len(runs), interpretError(err))
	}
	return nil
}
