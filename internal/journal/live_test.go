package journal_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// liveRow is a row of fairway_live_job, as the test compares it.
type liveRow struct {
	Group, ID, Task, State, Executor string
	Attempt, Retries                 int32
	DependsOn                        []string
}

// liveTable reads fairway_live_job.
func liveTable(t *testing.T, db *pgxpool.Pool) []liveRow {
	t.Helper()
	rows, err := db.Query(t.Context(), `SELECT group_name, id, task, state, coalesce(worker, ''), attempt, retries, depends_on
  FROM fairway_live_job ORDER BY group_name, id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (liveRow, error) {
		var l liveRow
		err := r.Scan(&l.Group, &l.ID, &l.Task, &l.State, &l.Executor, &l.Attempt, &l.Retries, &l.DependsOn)
		return l, err
	})
	require.NoError(t, err)
	return out
}

// liveOf is what fairway_live_job must hold of l's state.
func liveOf(t *testing.T, l *journal.Leader) []liveRow {
	t.Helper()
	var out []liveRow
	l.View(func(s *journal.State, _ journal.Lease) {
		for ref, j := range s.Jobs.All() {
			r := liveRow{Group: ref.Group, ID: ref.ID, Task: j.Task, State: string(j.State()), Attempt: j.Attempt, Retries: int32(j.Retries), DependsOn: s.DependsOn[ref.Group][ref.ID]}
			if j.Holder != nil {
				r.Executor = j.Holder.Executor
			}
			out = append(out, r)
		}
	})
	slices.SortFunc(out, func(a, b liveRow) int {
		if a.Group != b.Group {
			return map[bool]int{true: -1, false: 1}[a.Group < b.Group]
		}
		return map[bool]int{true: -1, false: 1}[a.ID < b.ID]
	})
	return out
}

// TestFairwayLiveIsTheLeadersState: after each write of the leader
// (every LiveEvery; here by hand), fairway_live_job holds exactly its
// state's unfinished jobs, through random rounds of submissions (some
// with dependencies), claims, starts, ends of every outcome, releases and
// cancels, with jobs that come and end between two writes. A leader
// rewrites it when it comes to lead, and a deposed leader's write
// changes nothing: the table stays its successor's.
func TestFairwayLiveIsTheLeadersState(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 40, "acme", "globex")
	// Jobs written by another before this leader: its rewrite clears them.
	_, err := db.Exec(ctx, `INSERT INTO fairway_live_job (group_name, id, task, state, priority, attempt, retries, max_retries, journal_row, journal_index)
VALUES ('acme', 'gone', 't', 'waiting', 'low', 0, 0, 0, 0, 0)`)
	require.NoError(t, err)
	cfg := journal.LeaderConfig{Holder: "c1", TTL: time.Hour, Renew: time.Hour, Poll: time.Hour, LivePoll: time.Hour}
	l := journal.NewLeader(db, cfg)
	go l.Run(ctx)
	require.Eventually(t, func() bool { return l.View(func(*journal.State, journal.Lease) {}) }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, l.WriteLive(ctx))
	require.Len(t, liveTable(t, db), 40, "the rewrite when it came to lead")
	require.Equal(t, liveOf(t, l), liveTable(t, db))

	rng := rand.New(rand.NewPCG(5, 23)) //nolint:gosec // a test's reproducible randomness
	next := 100
	submit := func(n int) {
		var items []journal.Item
		for range n {
			next++
			it := journal.Item{Group: []string{"acme", "globex"}[rng.IntN(2)], ID: fmt.Sprintf("n%03d", next), Task: "t", Priority: "low", MaxRetries: 1}
			if rng.IntN(3) == 0 {
				it.Waits = []string{fmt.Sprintf("j%02d", rng.IntN(40))} // of its group or not: kept as submitted
			}
			items = append(items, it)
		}
		body, err := journal.Encode(items)
		require.NoError(t, err)
		require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	}
	held := func(l *journal.Leader) []journal.Item {
		var out []journal.Item
		l.View(func(s *journal.State, _ journal.Lease) {
			for ref, j := range s.Jobs.All() {
				if j.Holder != nil {
					out = append(out, journal.Item{Group: ref.Group, ID: ref.ID, Attempt: j.Attempt, Executor: j.Holder.Executor, Instance: j.Holder.Instance})
				}
			}
		})
		slices.SortFunc(out, func(a, b journal.Item) int { return map[bool]int{true: -1, false: 1}[a.Group+a.ID < b.Group+b.ID] })
		return out
	}
	// report ends or releases some of the jobs l's state holds (and starts
	// the others).
	report := func(l *journal.Leader) {
		var reports []journal.Report
		for _, it := range held(l) {
			switch rng.IntN(4) {
			case 0:
				reports = append(reports, journal.Report{Kind: journal.Started, Item: it})
			case 1:
				it.Outcome = []string{journal.OutcomeSuccess, journal.OutcomeError, journal.OutcomeCancelled}[rng.IntN(3)]
				it.RunAt = 1
				reports = append(reports, journal.Report{Kind: journal.Ended, Item: it})
			case 2:
				reports = append(reports, journal.Report{Kind: journal.Released, Item: it})
			}
		}
		_, err := l.Report(ctx, reports)
		require.NoError(t, err)
	}
	for round := range 12 {
		submit(rng.IntN(6))
		_, err := l.Claim(ctx, claimParams("e1", "i", 1+rng.IntN(8)))
		require.NoError(t, err)
		report(l)
		if round%3 == 0 {
			// Submitted, claimed and ended between two writes.
			submit(3)
			_, err := l.Claim(ctx, claimParams("e1", "i", 20))
			require.NoError(t, err)
			report(l)
		}
		var cancel []fairway.JobRef
		l.View(func(s *journal.State, _ journal.Lease) {
			for ref, j := range s.Jobs.All() {
				if j.State() == fairway.StateWaiting && len(cancel) < 2 {
					cancel = append(cancel, ref)
				}
			}
		})
		_, err = l.Cancel(ctx, cancel, "by the test")
		require.NoError(t, err)
		require.NoError(t, l.WriteLive(ctx))
		require.Equal(t, liveOf(t, l), liveTable(t, db), "round %d", round)
	}

	// c1 claims without writing; c2 takes over, rewrites, ends what c1's
	// claim holds: c1's write, which would put them back, changes nothing.
	_, err = l.Claim(ctx, claimParams("e1", "i", 5))
	require.NoError(t, err)
	claimed := held(l)
	require.NotEmpty(t, claimed)
	expireLease(t, db)
	cfg.Holder = "c2"
	l2 := journal.NewLeader(db, cfg)
	go l2.Run(ctx)
	require.Eventually(t, func() bool { return l2.View(func(*journal.State, journal.Lease) {}) }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, l2.WriteLive(ctx))
	require.Equal(t, liveOf(t, l2), liveTable(t, db), "c2's rewrite")
	var ends []journal.Report
	for _, it := range claimed {
		it.Outcome = journal.OutcomeSuccess
		ends = append(ends, journal.Report{Kind: journal.Ended, Item: it})
	}
	_, err = l2.Report(ctx, ends)
	require.NoError(t, err)
	require.NoError(t, l2.WriteLive(ctx))
	require.Equal(t, liveOf(t, l2), liveTable(t, db))
	require.ErrorIs(t, l.WriteLive(ctx), journal.ErrFenced, "c1 did not know it was deposed")
	require.Equal(t, liveOf(t, l2), liveTable(t, db), "c1's write changed fairway_live_job")
}
