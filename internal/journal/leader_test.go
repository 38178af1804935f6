package journal_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TestALeaderTakesOverFromOneThatStops: c1 leads partition 0 and folds
// what is appended, taking snapshots; c2 follows, folding the same rows.
// c1 stops renewing (killed: it gives nothing up); c2 takes the lease with
// a higher epoch without restoring anything again, and its state is the
// fold of what PostgreSQL holds; c1's claims with its old epoch are
// refused.
func TestALeaderTakesOverFromOneThatStops(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	cfg := journal.LeaderConfig{TTL: time.Second, Renew: 100 * time.Millisecond, Poll: 10 * time.Millisecond, SnapshotRows: 5}
	submit := func(from, to int) {
		for i := from; i < to; i++ {
			body, err := journal.Encode([]journal.Item{{Group: "g", ID: fmt.Sprintf("j%03d", i), Task: "t"}})
			require.NoError(t, err)
			require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
		}
	}
	jobs := func(l *journal.Leader) (n int, lease journal.Lease, ok bool) {
		ok = l.View(func(s *journal.State, le journal.Lease) { n, lease = s.Jobs.Len(), le })
		return n, lease, ok
	}
	submit(0, 20)

	c1Cfg := cfg
	c1Cfg.Holder = "c1"
	c1 := journal.NewLeader(db, c1Cfg)
	c1Ctx, kill := context.WithCancel(ctx)
	defer kill()
	go c1.Run(c1Ctx)
	require.Eventually(t, func() bool { n, _, ok := jobs(c1); return ok && n == 20 }, 10*time.Second, 10*time.Millisecond, "c1 leads and folds")
	_, c1Lease, _ := jobs(c1)

	c2Cfg := cfg
	c2Cfg.Holder = "c2"
	c2 := journal.NewLeader(db, c2Cfg)
	go c2.Run(ctx)
	claim := func(lease journal.Lease, id string) error {
		body, err := journal.Encode([]journal.Item{{Group: "g", ID: id, Attempt: 1, Executor: "e", Instance: "i"}})
		require.NoError(t, err)
		return journal.AppendFenced(ctx, db, 0, lease.Epoch, journal.Claimed, body)
	}
	require.NoError(t, claim(c1Lease, "j000"))
	submit(20, 30)
	c1.Wake()
	require.Eventually(t, func() bool {
		n, _, ok := jobs(c1)
		held := false
		c1.View(func(s *journal.State, _ journal.Lease) {
			held = s.Jobs.Get(fairway.JobRef{Group: "g", ID: "j000"}).State() == fairway.StateScheduled
		})
		return ok && n == 30 && held
	}, 10*time.Second, 10*time.Millisecond, "c1 folds its claim and the new submissions")
	_, _, c2Leads := jobs(c2)
	require.False(t, c2Leads, "c2 leads while c1 holds the lease")
	require.Eventually(t, func() bool {
		n := 0
		c2.Follow(func(s *journal.State) { n = s.Jobs.Len() })
		return n == 30
	}, 10*time.Second, 10*time.Millisecond, "c2 follows")

	kill() // c1 stops renewing, as a process killed would
	submit(30, 33)
	require.Eventually(t, func() bool { n, _, ok := jobs(c2); return ok && n == 33 }, 10*time.Second, 10*time.Millisecond, "c2 takes over")
	_, c2Lease, _ := jobs(c2)
	require.Greater(t, c2Lease.Epoch, c1Lease.Epoch)
	require.Equal(t, 1, c2.Restores(), "c2 restored the state again to take over")
	require.ErrorIs(t, claim(c1Lease, "j001"), journal.ErrFenced, "the deposed leader claimed")
	require.NoError(t, claim(c2Lease, "j001"))
	c2.Wake()

	var snapshots int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_journal_snapshot WHERE partition = 0`).Scan(&snapshots))
	require.Equal(t, 1, snapshots, "no snapshot was taken")
	// c2 folds its claim: then its state is the fold of every row.
	require.Eventually(t, func() bool {
		held := false
		c2.View(func(s *journal.State, _ journal.Lease) {
			held = s.Jobs.Get(fairway.JobRef{Group: "g", ID: "j001"}).State() == fairway.StateScheduled
		})
		return held
	}, 10*time.Second, 10*time.Millisecond, "c2 folds its claim")
	fresh := journal.NewState()
	_, err := (&journal.Tail{}).Fold(ctx, db, fresh)
	require.NoError(t, err)
	c2.View(func(s *journal.State, _ journal.Lease) {
		require.Equal(t, fresh, s, "c2's state is not the fold of PostgreSQL's rows")
	})
}

// TestALeaderClaimsFromMemory: the leader hands out the jobs submitted to
// its partition from its memory, fairly (round-robin across groups, high
// priority first by the counting scheme), each once, with its arguments
// and its first attempt, through claimed rows that every reader folds to
// the same state; once another coordinator took the lease, its claim is
// refused, appends nothing, and the jobs it had picked are claimable by
// the new leader.
func TestALeaderClaimsFromMemory(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	var items []journal.Item
	for i := range 12 {
		group := []string{"acme", "globex", "hooli"}[i%3]
		it := journal.Item{Group: group, ID: fmt.Sprintf("j%02d", i), Task: "t", Priority: "low", Args: fmt.Appendf(nil, `{"n":%d}`, i)}
		if i == 10 { // globex's
			it.Priority = "high"
		}
		items = append(items, it)
	}
	body, err := journal.Encode(items)
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))

	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: time.Hour, Renew: time.Hour, Poll: time.Hour})
	go l.Run(ctx)
	require.Eventually(t, func() bool { return l.View(func(*journal.State, journal.Lease) {}) }, 10*time.Second, 5*time.Millisecond, "c1 leads")

	p := claimParams("e", "i", 3)
	var order []string
	seen := map[string]bool{}
	for {
		jobs, err := l.Claim(ctx, p)
		require.NoError(t, err)
		if len(jobs) == 0 {
			break
		}
		for _, j := range jobs {
			require.False(t, seen[j.Ref.ID], "%s handed out twice", j.Ref.ID)
			seen[j.Ref.ID] = true
			order = append(order, j.Ref.Group+"/"+j.Ref.ID)
			require.EqualValues(t, 1, j.Attempt)
			require.Equal(t, "t", j.Task)
			n, err := strconv.Atoi(j.Ref.ID[1:])
			require.NoError(t, err)
			require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, n), string(j.Args), "%s's arguments", j.Ref.ID)
		}
		if len(seen) == 9 {
			break
		}
	}
	// Round-robin from the first group, oldest first, but where the
	// counting scheme asks for high: globex's j10 before its older j01.
	require.Equal(t, []string{"acme/j00", "globex/j10", "hooli/j02", "acme/j03", "globex/j01", "hooli/j05", "acme/j06", "globex/j04", "hooli/j08"}, order)

	// A successor folds the same state from PostgreSQL alone.
	fresh := journal.NewState()
	_, err = (&journal.Tail{}).Fold(ctx, db, fresh)
	require.NoError(t, err)
	require.True(t, l.View(func(s *journal.State, _ journal.Lease) { require.Equal(t, fresh, s) }))

	// Another coordinator takes the lease: c1's next claim is refused.
	_, err = db.Exec(ctx, `UPDATE fairway_journal_lease SET until = now() - interval '1 second' WHERE partition = 0`)
	require.NoError(t, err)
	_, ok, err := journal.Acquire(ctx, db, 0, "c2", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = l.Claim(ctx, p)
	require.ErrorIs(t, err, journal.ErrFenced)
	_, err = l.Claim(ctx, p)
	require.ErrorIs(t, err, journal.ErrNotLeading)
	c2 := journal.NewLeader(db, journal.LeaderConfig{Holder: "c2", TTL: time.Hour, Renew: time.Hour, Poll: time.Hour})
	go c2.Run(ctx)
	require.Eventually(t, func() bool { return c2.View(func(*journal.State, journal.Lease) {}) }, 10*time.Second, 5*time.Millisecond, "c2 leads")
	jobs, err := c2.Claim(ctx, journal.ClaimParams{Executor: "e", Instance: "i", Limit: 10, Tasks: []string{"t"}, Scheme: p.Scheme})
	require.NoError(t, err)
	var rest []string
	for _, j := range jobs {
		rest = append(rest, j.Ref.ID)
	}
	require.ElementsMatch(t, []string{"j07", "j09", "j11"}, rest, "the jobs c1 could not claim")
}

// TestALeaderResolvesDependents: the fold never resolves a dependency
// itself (docs/journal.md, "Who appends what"); the leader does, with
// resolved rows: a job whose dependency succeeded becomes claimable, one
// whose dependency failed or was cancelled is cancelled, link by link
// along a chain, and a dependency that had ended before its dependent's
// submission was folded is resolved from its record (one that has none
// cancels the dependent, with why).
func TestALeaderResolvesDependents(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	body, err := journal.Encode([]journal.Item{
		{Group: "g", ID: "a", Task: "t"},
		{Group: "g", ID: "b", Task: "t", Waits: []string{"a"}},
		{Group: "g", ID: "c", Task: "t", Waits: []string{"b"}},
		{Group: "g", ID: "d", Task: "t", Waits: []string{"ended-ok"}},
		{Group: "g", ID: "e", Task: "t", Waits: []string{"ended-failed"}},
		{Group: "g", ID: "f", Task: "t", Waits: []string{"never"}},
		{Group: "g", ID: "x", Task: "t"},
		{Group: "g", ID: "y", Task: "t", Waits: []string{"x"}},
	})
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	records := func(_ context.Context, group string, ids []string) (map[string]fairway.State, error) {
		require.Equal(t, "g", group)
		return map[string]fairway.State{"ended-ok": fairway.StateSuccess, "ended-failed": fairway.StateFailed}, nil
	}
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: time.Hour, Renew: time.Hour, Poll: 5 * time.Millisecond, Records: records})
	go l.Run(ctx)
	state := func(id string) fairway.State {
		var st fairway.State = "ended"
		l.View(func(s *journal.State, _ journal.Lease) {
			if j := s.Jobs.Get(fairway.JobRef{Group: "g", ID: id}); j != nil {
				st = j.State()
			}
		})
		return st
	}
	require.Eventually(t, func() bool {
		return state("d") == fairway.StateWaiting && state("e") == "ended" && state("f") == "ended"
	},
		10*time.Second, 5*time.Millisecond, "the dependencies ended before were resolved from their records")
	require.Equal(t, fairway.StatePending, state("b"))

	// a fails for good, x succeeds.
	jobs, err := l.Claim(ctx, journal.ClaimParams{Executor: "w", Instance: "i", Limit: 10, Tasks: []string{"t"}})
	require.NoError(t, err)
	var ended []journal.Item
	for _, j := range jobs {
		switch j.Ref.ID {
		case "a":
			ended = append(ended, journal.Item{Group: "g", ID: "a", Attempt: j.Attempt, Executor: "w", Instance: "i", Outcome: journal.OutcomeError, Permanent: true, Error: "boom"})
		case "x":
			ended = append(ended, journal.Item{Group: "g", ID: "x", Attempt: j.Attempt, Executor: "w", Instance: "i", Outcome: journal.OutcomeSuccess})
		}
	}
	require.Len(t, ended, 2, "a and x were claimed: %v", jobs)
	var lease journal.Lease
	l.View(func(_ *journal.State, le journal.Lease) { lease = le })
	body, err = journal.Encode(ended)
	require.NoError(t, err)
	require.NoError(t, journal.AppendFenced(ctx, db, 0, lease.Epoch, journal.Ended, body))
	l.Wake()
	require.Eventually(t, func() bool {
		return state("b") == "ended" && state("c") == "ended" && state("y") == fairway.StateWaiting
	},
		10*time.Second, 5*time.Millisecond, "b and c cancelled along the chain, y released")

	// Why, as the resolved rows say it (every reader folds them).
	why := map[string]string{}
	rows, err := (&journal.Tail{}).Next(ctx, db, 0)
	require.NoError(t, err)
	for _, r := range rows {
		if r.Kind != journal.Resolved {
			continue
		}
		items, err := journal.Decode(r.Body)
		require.NoError(t, err)
		for _, it := range items {
			why[it.ID] = it.Error
		}
	}
	require.Equal(t, map[string]string{
		"b": "dependency a failed", "c": "dependency b was cancelled",
		"d": "", "e": "dependency ended-failed failed", "f": "dependency never is not known (never submitted, or pruned)",
		"y": "",
	}, why)
}

// TestANewLeaderResolvesWhatItsPredecessorLeft: a leader ends a job and
// dies before it resolves the job's dependent; the next leader finds the
// dependent waiting for a job its state no longer holds, and resolves it
// (from the record: the end it did not see as leader).
func TestANewLeaderResolvesWhatItsPredecessorLeft(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	body, err := journal.Encode([]journal.Item{{Group: "g", ID: "q", Task: "t"}, {Group: "g", ID: "p", Task: "t", Waits: []string{"q"}}})
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	// The predecessor: claims q, q succeeds, and it dies.
	old, ok, err := journal.Acquire(ctx, db, 0, "c1", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	body, err = journal.Encode([]journal.Item{{Group: "g", ID: "q", Attempt: 1, Executor: "w", Instance: "i"}})
	require.NoError(t, err)
	require.NoError(t, journal.AppendFenced(ctx, db, 0, old.Epoch, journal.Claimed, body))
	body, err = journal.Encode([]journal.Item{{Group: "g", ID: "q", Attempt: 1, Executor: "w", Instance: "i", Outcome: journal.OutcomeSuccess}})
	require.NoError(t, err)
	require.NoError(t, journal.AppendFenced(ctx, db, 0, old.Epoch, journal.Ended, body))
	_, err = db.Exec(ctx, `UPDATE fairway_journal_lease SET until = now() - interval '1 second' WHERE partition = 0`)
	require.NoError(t, err)

	var asked []string
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c2", TTL: time.Hour, Renew: time.Hour, Poll: 5 * time.Millisecond,
		Records: func(_ context.Context, _ string, ids []string) (map[string]fairway.State, error) {
			asked = append(asked, ids...)
			return map[string]fairway.State{"q": fairway.StateSuccess}, nil
		}})
	go l.Run(ctx)
	require.Eventually(t, func() bool {
		st := fairway.State("")
		l.View(func(s *journal.State, _ journal.Lease) {
			if j := s.Jobs.Get(fairway.JobRef{Group: "g", ID: "p"}); j != nil {
				st = j.State()
			}
		})
		return st == fairway.StateWaiting
	}, 10*time.Second, 5*time.Millisecond, "p released by the new leader")
	require.Equal(t, []string{"q"}, asked, "q's end was read from its record")
}

// TestALeaderSharesByTheWeightsOfItsState: a group's weight is a row the
// leader appends (refused when out of bounds, naming the field), its
// claims pick by the weights and virtual times of its state's book (acme
// of weight 3 gets three jobs for globex's one), each claimed item
// carries its charge, and a successor folds the same book from
// PostgreSQL alone and goes on with the same shares.
func TestALeaderSharesByTheWeightsOfItsState(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 80, "acme", "globex")

	l := leading(t, db, "c1")
	require.ErrorContains(t, l.SetWeight(ctx, "acme", 0), "weight")
	require.NoError(t, l.SetWeight(ctx, "acme", 3))

	p := claimParams("e", "i", 1)
	claim := func(l *journal.Leader, n int) map[string]int {
		got := map[string]int{}
		for range n {
			jobs, err := l.Claim(ctx, p)
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			got[jobs[0].Ref.Group]++
		}
		return got
	}
	require.Equal(t, map[string]int{"acme": 15, "globex": 5}, claim(l, 20))

	fresh := journal.NewState()
	_, err := (&journal.Tail{}).Fold(ctx, db, fresh)
	require.NoError(t, err)
	require.InDelta(t, 3, fresh.Shares.Weight("acme"), 0)
	require.InDelta(t, 5, fresh.Shares.VTimes["acme"], 1e-9, "acme's virtual time: 15 jobs of cost 1 over weight 3")
	require.InDelta(t, 5, fresh.Shares.VTimes["globex"], 1e-9, "globex's virtual time: 5 jobs")
	require.True(t, l.View(func(s *journal.State, _ journal.Lease) { require.Equal(t, fresh, s) }))

	expireLease(t, db)
	c2 := leading(t, db, "c2")
	require.ErrorIs(t, l.SetWeight(ctx, "globex", 2), journal.ErrFenced)
	require.Equal(t, map[string]int{"acme": 15, "globex": 5}, claim(c2, 20), "the successor's shares")
}

// TestALeaderLimitsRatesFromItsState: a rate limit is a row the leader
// appends (one without a scope is refused, naming it); its claims pass
// over the jobs whose bucket is spent and take the others, and a
// successor holds the same buckets: it starts no more of them.
func TestALeaderLimitsRatesFromItsState(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 10, "acme", "globex")
	l := leading(t, db, "c1")
	require.ErrorContains(t, l.SetRateLimit(ctx, fairness.RateLimit{Starts: 2, Period: time.Hour}), "scope")
	require.NoError(t, l.SetRateLimit(ctx, fairness.RateLimit{Group: "acme", Starts: 2, Period: time.Hour}))

	p := claimParams("e", "i", 10)
	groupsOf := func(jobs []journal.ClaimedJob) map[string]int {
		got := map[string]int{}
		for _, j := range jobs {
			got[j.Ref.Group]++
		}
		return got
	}
	jobs, err := l.Claim(ctx, p)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"acme": 2, "globex": 5}, groupsOf(jobs))

	expireLease(t, db)
	c2 := leading(t, db, "c2")
	jobs, err = c2.Claim(ctx, p)
	require.NoError(t, err)
	require.Empty(t, jobs, "the successor started acme's jobs beyond its rate")
	require.NoError(t, c2.SetRateLimit(ctx, fairness.RateLimit{Group: "acme"})) // removed
	jobs, err = c2.Claim(ctx, p)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"acme": 3}, groupsOf(jobs))
}

// leading starts a leader of partition 0 named holder on db, which reads
// the tail only when woken, and waits until it leads.
func leading(t *testing.T, db *pgxpool.Pool, holder string) *journal.Leader {
	t.Helper()
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: holder, TTL: time.Hour, Renew: time.Hour, Poll: time.Hour})
	go l.Run(t.Context())
	require.Eventually(t, func() bool { return l.View(func(*journal.State, journal.Lease) {}) }, 10*time.Second, 5*time.Millisecond, "%s leads", holder)
	return l
}

// submitJobs appends a submitted row of n jobs of task t, alternately of
// groups, with ids j00, j01, …
func submitJobs(t *testing.T, db *pgxpool.Pool, n int, groups ...string) {
	t.Helper()
	var items []journal.Item
	for i := range n {
		items = append(items, journal.Item{Group: groups[i%len(groups)], ID: fmt.Sprintf("j%02d", i), Task: "t", Priority: "low"})
	}
	body, err := journal.Encode(items)
	require.NoError(t, err)
	require.NoError(t, journal.Append(t.Context(), db, 0, journal.Submitted, body))
}

// claimParams are the parameters of a claim of up to limit jobs of task
// t, by executor's instance, under the counting scheme 3,1.
func claimParams(executor, instance string, limit int) journal.ClaimParams {
	return journal.ClaimParams{Executor: executor, Instance: instance, Limit: limit, Tasks: []string{"t"}, Scheme: fairway.CountingScheme{High: 3, Low: 1}}
}

// expireLease makes partition 0's lease run out now.
func expireLease(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	_, err := db.Exec(t.Context(), `UPDATE fairway_journal_lease SET until = now() - interval '1 second' WHERE partition = 0`)
	require.NoError(t, err)
}

// TestALeaderAppliesReports: executors' reports go to the leader, which
// appends them in one transaction, a row per kind (a start before a
// progress before an end), and says which applied. Random batches of
// reports (starts, progress, ends of every outcome, releases; of the
// current attempt, a stale one, another instance's; the same job
// several times) against jobs held by two executors: each answer must be
// what folding the batch's items one by one, in the rows' order, does
// to the job (applied: it changed), and the leader's state the fold of
// PostgreSQL's rows.
func TestALeaderAppliesReports(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 60, "acme", "globex", "hooli")
	l := leading(t, db, "c1")
	rng := rand.New(rand.NewPCG(31, 4)) //nolint:gosec // a test's reproducible randomness
	claim := func() {
		for _, e := range []string{"e1", "e2"} {
			_, err := l.Claim(ctx, claimParams(e, "i", 4))
			require.NoError(t, err)
		}
	}
	claim()
	progress := int16(0)
	applied := 0
	for round := range 40 {
		// The leader's state before the batch, and its held jobs.
		var before *journal.State
		var held []fairway.JobRef
		require.True(t, l.View(func(s *journal.State, _ journal.Lease) {
			snap, err := s.Snapshot()
			require.NoError(t, err)
			before, err = journal.Restore(snap)
			require.NoError(t, err)
			for ref, j := range s.Jobs.All() {
				if j.Holder != nil {
					held = append(held, ref)
				}
			}
		}))
		slices.SortFunc(held, func(a, b fairway.JobRef) int { return strings.Compare(a.Group+a.ID, b.Group+b.ID) })
		if len(held) == 0 {
			break
		}
		var reports []journal.Report
		for range 1 + rng.IntN(8) {
			ref := held[rng.IntN(len(held))]
			j := before.Jobs.Get(ref)
			it := journal.Item{Group: ref.Group, ID: ref.ID, Attempt: j.Attempt, Executor: j.Holder.Executor, Instance: j.Holder.Instance}
			switch rng.IntN(8) {
			case 0:
				it.Attempt-- // stale
			case 1:
				it.Instance = "another"
			}
			kind := []journal.Kind{journal.Started, journal.Progress, journal.Ended, journal.Released}[rng.IntN(4)]
			switch kind {
			case journal.Progress:
				progress = progress%99 + 1
				it.Progress = progress
			case journal.Ended:
				it.Outcome = []string{journal.OutcomeSuccess, journal.OutcomeError, journal.OutcomeSnooze, journal.OutcomeCancelled}[rng.IntN(4)]
				it.RunAt = 1
			case journal.Released:
				it.Counted = rng.IntN(2) == 0
				it.GiveBack = !it.Counted && rng.IntN(2) == 0
			}
			reports = append(reports, journal.Report{Kind: kind, Item: it})
		}
		got, err := l.Report(ctx, reports)
		require.NoError(t, err)

		// What folding each item alone, in the rows' order, does.
		want := make([]bool, len(reports))
		for _, kind := range []journal.Kind{journal.Started, journal.Progress, journal.Released, journal.Ended} {
			for i, r := range reports {
				if r.Kind != kind {
					continue
				}
				ref := fairway.JobRef{Group: r.Item.Group, ID: r.Item.ID}
				var was journal.Job
				if j := before.Jobs.Get(ref); j != nil {
					was = *j
				}
				apply(t, before, row(t, int64(round*100+i), kind, r.Item))
				var is journal.Job
				if j := before.Jobs.Get(ref); j != nil {
					is = *j
				}
				want[i] = !reflect.DeepEqual(was, is)
			}
		}
		require.Equal(t, want, got, "round %d: which reports applied: %+v", round, reports)
		for _, a := range got {
			if a {
				applied++
			}
		}
		claim()
	}
	require.Greater(t, applied, 40, "too few reports applied to test anything")
	fresh := journal.NewState()
	_, err := (&journal.Tail{}).Fold(ctx, db, fresh)
	require.NoError(t, err)
	require.True(t, l.View(func(s *journal.State, _ journal.Lease) { require.Equal(t, fresh, s) }))
	// Each job has ended, with its record, or lives in the state: not both.
	rows, err := db.Query(ctx, `SELECT group_name, id FROM fairway_job`)
	require.NoError(t, err)
	recorded, err := pgx.CollectRows(rows, pgx.RowToStructByPos[fairway.JobRef])
	require.NoError(t, err)
	require.NotEmpty(t, recorded)
	for _, ref := range recorded {
		require.Nil(t, fresh.Jobs.Get(ref), "%s/%s has a record and lives", ref.Group, ref.ID)
	}
	require.Equal(t, 60, len(recorded)+fresh.Jobs.Len(), "jobs lost or recorded twice")

	_, err = l.Report(ctx, []journal.Report{{Kind: journal.Claimed}})
	require.ErrorContains(t, err, "a report of kind")
}

// TestALeaderAppendsNoReportOfAJobThatEnded: the reports of a job that
// has ended, sent again (a batch of results tried again after another
// partition's database failed it), append no row and say they changed
// nothing; a stale report of a job that still lives is appended as
// before (its append checks the lease).
func TestALeaderAppendsNoReportOfAJobThatEnded(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 2, "acme")
	l := leading(t, db, "c1")
	jobs, err := l.Claim(ctx, claimParams("e", "i", 2))
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	rows := func() int {
		var n int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_journal WHERE kind IN ('started', 'ended')`).Scan(&n))
		return n
	}
	item := func(j journal.ClaimedJob) journal.Item {
		return journal.Item{Group: j.Ref.Group, ID: j.Ref.ID, Attempt: j.Attempt, Executor: "e", Instance: "i", Outcome: journal.OutcomeSuccess}
	}
	ended := []journal.Report{{Kind: journal.Started, Item: item(jobs[0])}, {Kind: journal.Ended, Item: item(jobs[0])}}
	applied, err := l.Report(ctx, ended)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, applied)
	before := rows()
	require.Equal(t, 2, before, "a start and an end")

	applied, err = l.Report(ctx, ended)
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, applied, "sent again: nothing changes")
	require.Equal(t, before, rows(), "and nothing is appended")

	stale := item(jobs[1])
	stale.Attempt++ // an attempt the job does not run: the job lives
	applied, err = l.Report(ctx, []journal.Report{{Kind: journal.Ended, Item: stale}})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, applied)
	require.Equal(t, before+1, rows(), "a stale report of a living job is appended, its lease checked")
}

// TestALeaderRecordsTheJobsItEnds: a job's record (its row in fairway_job)
// is written once, at its end, in the transaction that appends the row
// that ends it: a success with its result, a failure with its error and
// its last attempt counted, a dependent cancelled with its dependency;
// each with what its submission said (args, tracker, subject) and when it
// was submitted, claimed, started and finished. A job that does not end
// has none, and a deposed leader's reports write none.
func TestALeaderRecordsTheJobsItEnds(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	body, err := journal.Encode([]journal.Item{
		{Group: "g", ID: "ok", Task: "t", Priority: "high", Args: []byte(`{"n":1}`), Tracker: "tr", Subject: "fairway.g.submit", Submitter: "app", Timeout: "30s"},
		{Group: "g", ID: "bad", Task: "t", Priority: "low", MaxRetries: 0, Args: []byte(`{"n":2}`)},
		{Group: "g", ID: "dep", Task: "t", Priority: "low", Waits: []string{"bad"}},
		{Group: "g", ID: "live", Task: "t", Priority: "low"},
		{Group: "g", ID: "again", Task: "t", Priority: "low", MaxRetries: 3},
	})
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	var submittedAt time.Time
	require.NoError(t, db.QueryRow(ctx, `SELECT at FROM fairway_journal WHERE kind = 'submitted'`).Scan(&submittedAt))
	l := leading(t, db, "c1")
	jobs, err := l.Claim(ctx, claimParams("e", "i", 10))
	require.NoError(t, err)
	require.Len(t, jobs, 4, "the four jobs that wait for nothing")
	at := func(id string) journal.Item {
		return journal.Item{Group: "g", ID: id, Attempt: 1, Executor: "e", Instance: "i"}
	}
	with := func(it journal.Item, f func(*journal.Item)) journal.Item { f(&it); return it }
	started := time.Now().UnixMicro() // after the claim: kept as reported
	applied, err := l.Report(ctx, []journal.Report{
		{Kind: journal.Started, Item: with(at("ok"), func(it *journal.Item) { it.RunAt = started })},
		{Kind: journal.Ended, Item: with(at("ok"), func(it *journal.Item) { it.Outcome, it.Result = journal.OutcomeSuccess, []byte(`{"pages":3}`) })},
		{Kind: journal.Ended, Item: with(at("bad"), func(it *journal.Item) { it.Outcome, it.Error = journal.OutcomeError, "boom" })},
		{Kind: journal.Ended, Item: with(at("again"), func(it *journal.Item) { it.Outcome, it.Error, it.RunAt = journal.OutcomeError, "retry me", 1 })},
		{Kind: journal.Started, Item: with(at("live"), func(it *journal.Item) { it.RunAt = 1 })}, // before its claim: a skewed clock
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true, true}, applied)
	// The running job, as the stats and the groups' shares read it.
	running, err := l.RunningJobs(ctx)
	require.NoError(t, err)
	require.Len(t, running, 1, "live runs")
	require.Equal(t, "g", running[0].Group)
	require.Positive(t, running[0].Started)
	now := time.Now()
	since := now.Add(-time.Hour)
	sets, held, err := l.LiveStats(ctx, "g", since, now, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []journal.HeldStart{{Task: "t", Started: running[0].Started, Due: submittedAt.UnixMicro()}}, held)
	startedAt := running[0].Started
	// live waited from its submission to its start, and runs since;
	// again waits since its retry was due (RunAt 1: at once, so since its
	// submission).
	want := journal.SumIntervals([]journal.Interval{
		{Group: "g", From: submittedAt.UnixMicro(), To: startedAt},
		{Group: "g", Running: true, From: startedAt, To: now.UnixMicro()},
		{Group: "g", From: submittedAt.UnixMicro(), To: now.UnixMicro()},
	}, since, now, time.Minute)
	require.ElementsMatch(t, want, sets)
	// dep is cancelled with bad, by the leader's resolved row.
	require.Eventually(t, func() bool {
		l.Wake() // it resolves dependents as it catches up
		var n int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_job WHERE id = 'dep'`).Scan(&n))
		return n == 1
	}, 10*time.Second, 5*time.Millisecond, "dep's record")

	type record struct {
		ID, Task, Priority, State string
		Args                      string
		Result, Error, Tracker    *string
		Subject, Submitter        string
		Retries, MaxRetries       int
		Attempt                   int
		Worker                    *string
		WorkerInstance            string
		Submitted                 time.Time
		ScheduledAt, Started      *time.Time
		Finished                  *time.Time
		TimeoutMS                 *int64
		DependsOn                 []string
	}
	rows, err := db.Query(ctx, `SELECT id, task, priority, state, args::text, result::text, error, tracker, subject, submitter, retries, max_retries,
       attempt, worker, worker_instance, submitted, scheduled_at, started, finished, timeout_ms, depends_on
  FROM fairway_job ORDER BY id`)
	require.NoError(t, err)
	records, err := pgx.CollectRows(rows, pgx.RowToStructByPos[record])
	require.NoError(t, err)
	require.Len(t, records, 3, "records of the jobs that ended, and only those: %+v", records)
	byID := map[string]record{}
	for _, r := range records {
		byID[r.ID] = r
		index := map[string]int{"ok": 0, "bad": 1, "dep": 2, "live": 3, "again": 4}[r.ID] // in the row
		want := submittedAt.Add(time.Duration(index) * time.Microsecond)
		require.True(t, r.Submitted.Equal(want), "%s submitted %v, its row at %v", r.ID, r.Submitted, submittedAt)
		require.NotNil(t, r.Finished, r.ID)
	}
	ok := byID["ok"]
	require.Equal(t, "success", ok.State)
	require.JSONEq(t, `{"n":1}`, ok.Args)
	require.JSONEq(t, `{"pages":3}`, *ok.Result)
	require.Equal(t, "tr", *ok.Tracker)
	require.Equal(t, "fairway.g.submit", ok.Subject)
	require.Equal(t, "app", ok.Submitter)
	require.Equal(t, "high", ok.Priority)
	require.Equal(t, 1, ok.Attempt)
	require.Equal(t, "e", *ok.Worker)
	require.Equal(t, "i", ok.WorkerInstance)
	require.Equal(t, int64(30_000), *ok.TimeoutMS)
	require.Equal(t, started, ok.Started.UnixMicro(), "the start its executor reported")
	require.True(t, l.View(func(s *journal.State, _ journal.Lease) {
		h := s.Jobs.Get(fairway.JobRef{Group: "g", ID: "live"}).Holder
		require.Equal(t, h.Scheduled, h.Started, "a start reported before the claim is kept at the claim")
	}))
	require.NotNil(t, ok.ScheduledAt)
	require.Nil(t, ok.Error)

	bad := byID["bad"]
	require.Equal(t, "failed", bad.State)
	require.Equal(t, "boom", *bad.Error)
	require.Equal(t, 1, bad.Retries, "the attempt that failed last counts")
	require.Nil(t, bad.Result)
	require.Nil(t, bad.Started, "it never reported a start")

	dep := byID["dep"]
	require.Equal(t, "cancelled", dep.State)
	require.Contains(t, *dep.Error, "dependency bad failed")
	require.Equal(t, []string{"bad"}, dep.DependsOn)
	require.Nil(t, dep.Worker)
	require.Equal(t, 0, dep.Attempt)

	// A deposed leader's end writes no record.
	expireLease(t, db)
	_, ok2, err := journal.Acquire(ctx, db, 0, "c2", time.Hour)
	require.NoError(t, err)
	require.True(t, ok2)
	_, err = l.Report(ctx, []journal.Report{{Kind: journal.Ended, Item: with(at("live"), func(it *journal.Item) { it.Outcome = journal.OutcomeSuccess })}})
	require.ErrorIs(t, err, journal.ErrFenced)
	var n int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_job WHERE id = 'live'`).Scan(&n))
	require.Zero(t, n, "a deposed leader's end wrote a record")
}

// TestALeaderCancels: a cancel ends a job that is not held (its record
// written with the cancel), marks a held one (it ends cancelled, with its
// record, when its executor reports), says so of one marked before and of
// one it does not hold, and the jobs waiting for a cancelled one are
// cancelled with it by the leader's resolved row.
func TestALeaderCancels(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	body, err := journal.Encode([]journal.Item{
		{Group: "g", ID: "held", Task: "t", Priority: "low"}, // the oldest: claimed
		{Group: "g", ID: "waiting", Task: "t", Priority: "low"},
		{Group: "g", ID: "after", Task: "t", Priority: "low", Waits: []string{"waiting"}},
	})
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	l := leading(t, db, "c1")
	jobs, err := l.Claim(ctx, journal.ClaimParams{Executor: "e", Instance: "i", Limit: 1, Tasks: []string{"t"}, Groups: []string{"g"}, Scheme: fairway.CountingScheme{High: 3, Low: 1}})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	heldID, waitingID := "held", "waiting"
	require.Equal(t, heldID, jobs[0].Ref.ID)

	ref := func(id string) fairway.JobRef { return fairway.JobRef{Group: "g", ID: id} }
	out, err := l.Cancel(ctx, []fairway.JobRef{ref(waitingID), ref(heldID), ref("nope"), ref(waitingID)}, "cancelled by hand")
	require.NoError(t, err)
	require.Equal(t, []journal.CancelOutcome{journal.CancelEnded, journal.CancelRequested, journal.CancelNotFound, journal.CancelEnded}, out)
	out, err = l.Cancel(ctx, []fairway.JobRef{ref(heldID), ref(waitingID)}, "again")
	require.NoError(t, err)
	require.Equal(t, []journal.CancelOutcome{journal.CancelAlreadyRequested, journal.CancelNotFound}, out)

	recordOf := func(id string) (state, why string) {
		err := db.QueryRow(ctx, `SELECT state, coalesce(error, '') FROM fairway_job WHERE group_name = 'g' AND id = $1`, id).Scan(&state, &why)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", ""
		}
		require.NoError(t, err)
		return state, why
	}
	st, why := recordOf(waitingID)
	require.Equal(t, "cancelled", st)
	require.Equal(t, "cancelled by hand", why)
	st, _ = recordOf(heldID)
	require.Empty(t, st, "a held job's cancel is a request: it has no record yet")

	applied, err := l.Report(ctx, []journal.Report{{Kind: journal.Ended, Item: journal.Item{Group: "g", ID: heldID, Attempt: 1, Executor: "e", Instance: "i",
		Outcome: journal.OutcomeCancelled, Error: "stopped"}}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied)
	st, _ = recordOf(heldID)
	require.Equal(t, "cancelled", st)

	require.Eventually(t, func() bool {
		l.Wake()
		st, _ := recordOf("after")
		return st == "cancelled"
	}, 10*time.Second, 5*time.Millisecond, "after waits for a cancelled job: cancelled with it")
}

// TestALeaderFailsJobsThatExpire: a job whose expiry passed before it ran
// fails, by the leader's expired row, with its record (and one waiting
// for it is cancelled with it); one that expires later waits on.
func TestALeaderFailsJobsThatExpire(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	past, later := time.Now().Add(-time.Second).UnixMicro(), time.Now().Add(time.Hour).UnixMicro()
	body, err := journal.Encode([]journal.Item{
		{Group: "g", ID: "stale", Task: "t", Priority: "low", ExpiresAt: past},
		{Group: "g", ID: "fresh", Task: "t", Priority: "low", ExpiresAt: later},
		{Group: "g", ID: "next", Task: "t", Priority: "low", Waits: []string{"stale"}},
	})
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	l := leading(t, db, "c1")
	records := func() map[string]string {
		rows, err := db.Query(ctx, `SELECT id, state || ': ' || coalesce(error, '') FROM fairway_job`)
		require.NoError(t, err)
		out := map[string]string{}
		var id, what string
		_, err = pgx.ForEachRow(rows, []any{&id, &what}, func() error { out[id] = what; return nil })
		require.NoError(t, err)
		return out
	}
	require.Eventually(t, func() bool {
		l.Wake()
		return len(records()) == 2
	}, 10*time.Second, 5*time.Millisecond, "stale and next ended")
	require.Equal(t, map[string]string{"stale": "failed: expired", "next": "cancelled: dependency stale failed"}, records())
	require.True(t, l.View(func(s *journal.State, _ journal.Lease) {
		require.Equal(t, fairway.StateWaiting, s.Jobs.Get(fairway.JobRef{Group: "g", ID: "fresh"}).State())
	}))
}

// TestALeaderReleasesTheJobsOfAnInstance: an executor's instance that
// stops gives its jobs back uncounted (they wait again, their attempts
// kept, none failed); one lost gives them back counted (a job out of
// retries fails, with its record; the others are retried); another
// instance's jobs stay where they are.
func TestALeaderReleasesTheJobsOfAnInstance(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 9, "acme", "globex", "hooli")
	l := leading(t, db, "c1")
	claim := func(instance string, n int) []journal.ClaimedJob {
		jobs, err := l.Claim(ctx, claimParams("e", instance, n))
		require.NoError(t, err)
		require.Len(t, jobs, n)
		return jobs
	}
	stopping, lost, other := claim("i1", 3), claim("i2", 3), claim("i3", 3)
	n, err := l.Release(ctx, map[journal.Instance]bool{{Executor: "e", Instance: "i1"}: true}, false, "executor is stopping")
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = l.Release(ctx, map[journal.Instance]bool{{Executor: "e", Instance: "i2"}: true}, true, "executor lost")
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.True(t, l.View(func(s *journal.State, _ journal.Lease) {
		for _, j := range stopping {
			got := s.Jobs.Get(j.Ref)
			require.Equal(t, fairway.StateWaiting, got.State(), j.Ref.ID)
			require.EqualValues(t, 1, got.Attempt)
			require.Zero(t, got.Retries)
		}
		for _, j := range lost {
			require.Nil(t, s.Jobs.Get(j.Ref), "%s had no retries left: it failed", j.Ref.ID) // submitJobs gives no retries
		}
		for _, j := range other {
			require.Equal(t, fairway.StateScheduled, s.Jobs.Get(j.Ref).State())
		}
	}))
	var failed int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_job WHERE state = 'failed' AND error = 'executor lost'`).Scan(&failed))
	require.Equal(t, 3, failed)
	n, err = l.Release(ctx, map[journal.Instance]bool{{Executor: "e", Instance: "nobody"}: true}, true, "lost")
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestALeaderReleasesTheJobsOfLostExecutors: the executors' registry
// says which holders are lost: one silent for a lease, one replaced by a
// newer instance of its app-id, one marked gone, one never registered.
// Their jobs are given back counted (out of retries here: each fails,
// its record saying why, as the row engine says it); a live executor's
// jobs stay held. Asked again, nothing more is released.
func TestALeaderReleasesTheJobsOfLostExecutors(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 10, "acme", "globex")
	l := leading(t, db, "c1")
	_, err := db.Exec(ctx, `INSERT INTO fairway_executor (app_id, instance, slots, started, last_heartbeat, state) VALUES
 ('live', 'i', 2, now(), now(), 'live'),
 ('silent', 'i', 2, now(), now() - interval '1 hour', 'live'),
 ('restarted', 'new', 2, now(), now(), 'live'),
 ('gone', 'i', 2, now(), now() - interval '1 hour', 'gone')`)
	require.NoError(t, err)
	held := map[string][]journal.ClaimedJob{}
	for _, h := range []journal.Instance{{Executor: "live", Instance: "i"}, {Executor: "silent", Instance: "i"},
		{Executor: "restarted", Instance: "old"}, {Executor: "gone", Instance: "i"}, {Executor: "unknown", Instance: "i"}} {
		jobs, err := l.Claim(ctx, claimParams(h.Executor, h.Instance, 2))
		require.NoError(t, err)
		require.Len(t, jobs, 2)
		held[h.Executor] = jobs
	}
	n, err := l.ReleaseLost(ctx, 3*time.Second)
	require.NoError(t, err)
	require.Equal(t, 8, n)
	require.True(t, l.View(func(s *journal.State, _ journal.Lease) {
		for _, j := range held["live"] {
			require.Equal(t, fairway.StateScheduled, s.Jobs.Get(j.Ref).State(), "a live executor's job")
		}
	}))
	why := map[string]string{}
	rows, err := db.Query(ctx, `SELECT id, error FROM fairway_job WHERE state = 'failed'`)
	require.NoError(t, err)
	var id, msg string
	_, err = pgx.ForEachRow(rows, []any{&id, &msg}, func() error { why[id] = msg; return nil })
	require.NoError(t, err)
	want := map[string]string{}
	for app, reason := range map[string]string{
		"silent": "executor lost: its lease expired without a heartbeat", "gone": "executor lost: its lease expired without a heartbeat",
		"restarted": "executor lost: it restarted", "unknown": "executor lost: it is no longer registered",
	} {
		for _, j := range held[app] {
			want[j.Ref.ID] = reason
		}
	}
	require.Equal(t, want, why)
	n, err = l.ReleaseLost(ctx, 3*time.Second)
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestALeaderBoundsWhatAnInstanceHolds: a claim takes at most what the
// instance has room for under MaxHeld, whatever it asks; another instance
// of the same executor has its own room; an end makes room again.
func TestALeaderBoundsWhatAnInstanceHolds(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 10, "acme", "globex")
	l := leading(t, db, "c1")
	claim := func(instance string, limit int) []journal.ClaimedJob {
		p := claimParams("e", instance, limit)
		p.MaxHeld = 3
		jobs, err := l.Claim(ctx, p)
		require.NoError(t, err)
		return jobs
	}
	first := claim("i1", 5)
	require.Len(t, first, 3, "room for 3")
	require.Empty(t, claim("i1", 5), "full")
	require.Len(t, claim("i2", 2), 2, "another instance's room")
	it := journal.Item{Group: first[0].Ref.Group, ID: first[0].Ref.ID, Attempt: first[0].Attempt, Executor: "e", Instance: "i1", Outcome: journal.OutcomeSuccess}
	_, err := l.Report(ctx, []journal.Report{{Kind: journal.Ended, Item: it}})
	require.NoError(t, err)
	require.Len(t, claim("i1", 5), 1, "an end makes room for one")
}

// TestALeaderAnswersARequestSentAgain: a dispatch request sent again
// under its id (its answer was lost) gets the jobs it claimed, with their
// arguments, and claims no more; those of them that ended are not handed
// out again; a new request claims anew; and a successor that takes over
// answers the request the same, from the claimed row.
func TestALeaderAnswersARequestSentAgain(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 12, "acme", "globex")
	l := leading(t, db, "c1")
	claim := func(l *journal.Leader, id string, limit int) []journal.ClaimedJob {
		p := claimParams("e", "i", limit)
		p.ClaimID = id
		jobs, err := l.Claim(ctx, p)
		require.NoError(t, err)
		return jobs
	}
	first := claim(l, "r1", 3)
	require.Len(t, first, 3)
	require.Equal(t, first, claim(l, "r1", 3), "the same jobs, arguments and attempts: no more claimed")
	require.Equal(t, first, claim(l, "r1", 10), "whatever it asks the second time")
	second := claim(l, "r2", 2)
	require.Len(t, second, 2)
	require.NotContains(t, first, second[0])

	it := journal.Item{Group: first[0].Ref.Group, ID: first[0].Ref.ID, Attempt: first[0].Attempt, Executor: "e", Instance: "i", Outcome: journal.OutcomeSuccess}
	_, err := l.Report(ctx, []journal.Report{{Kind: journal.Ended, Item: it}})
	require.NoError(t, err)
	require.Equal(t, first[1:], claim(l, "r1", 3), "an ended job is not handed out again")

	// A successor, from PostgreSQL's rows and the snapshot.
	l2 := journal.NewLeader(db, journal.LeaderConfig{Holder: "c2", TTL: time.Hour, Renew: 50 * time.Millisecond, Poll: 10 * time.Millisecond})
	go l2.Run(ctx)
	expireLease(t, db)
	require.Eventually(t, func() bool { return l2.View(func(*journal.State, journal.Lease) {}) }, 10*time.Second, 5*time.Millisecond, "c2 leads")
	require.Equal(t, first[1:], claim(l2, "r1", 3), "the successor answers the request sent again the same")
	require.Equal(t, second, claim(l2, "r2", 2))
	require.Len(t, claim(l2, "r3", 20), 12-5, "the rest, to a new request")
}

// TestALeaderReleasesOverdueJobs: whatever its executor says, a started
// job is given back (counted) past its start + its timeout + twice the
// lease, one without a timeout past fairway.MaxTimeout, and one never
// started past its hand-over + MaxHold.
func TestALeaderReleasesOverdueJobs(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	body, err := journal.Encode([]journal.Item{{Group: "g", ID: "timed", Task: "t", Timeout: "10s"},
		{Group: "g", ID: "untimed", Task: "t"}, {Group: "g", ID: "unstarted", Task: "t"}})
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	l := leading(t, db, "c1")
	jobs, err := l.Claim(ctx, claimParams("e", "i", 3))
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	var starts []journal.Report
	for _, id := range []string{"timed", "untimed"} {
		starts = append(starts, journal.Report{Kind: journal.Started, Item: journal.Item{Group: "g", ID: id, Attempt: 1, Executor: "e", Instance: "i"}})
	}
	_, err = l.Report(ctx, starts)
	require.NoError(t, err)
	held := func() []string {
		var ids []string
		l.View(func(s *journal.State, _ journal.Lease) {
			for ref, j := range s.Jobs.All() {
				if j.Holder != nil {
					ids = append(ids, ref.ID)
				}
			}
		})
		slices.Sort(ids)
		return ids
	}
	now, lease := time.Now(), time.Second
	for _, step := range []struct {
		after time.Duration
		held  []string
	}{
		{5 * time.Second, []string{"timed", "unstarted", "untimed"}},
		{14 * time.Second, []string{"unstarted", "untimed"}}, // 10 s + 2 leases
		{journal.MaxHold + time.Minute, []string{"untimed"}},
		{fairway.MaxTimeout + time.Minute, nil},
	} {
		_, err := l.ReleaseOverdue(ctx, lease, now.Add(step.after))
		require.NoError(t, err)
		require.Equal(t, step.held, held(), "after %s", step.after)
	}
	var failed int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_job WHERE state = 'failed' AND error = 'executor lost: its lease expired without a heartbeat'`).Scan(&failed))
	require.Equal(t, 3, failed, "each attempt counted, and out of retries")
}

// TestALeaderSaysWhenJobsBecomeClaimable: the leader calls Claimable
// when it comes to lead, when a fold makes a job claimable (a
// submission: a claim then takes it), when a held job leaves its place
// (an end), and when a delayed job's time comes, not before it.
func TestALeaderSaysWhenJobsBecomeClaimable(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	told := make(chan time.Time, 100)
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: time.Hour, Renew: time.Hour, Poll: time.Hour,
		Claimable: func() { told <- time.Now() }})
	go l.Run(ctx)
	require.Eventually(t, func() bool { return l.View(func(*journal.State, journal.Lease) {}) }, 10*time.Second, 5*time.Millisecond)
	await := func(what string) time.Time {
		t.Helper()
		select {
		case at := <-told:
			return at
		case <-time.After(10 * time.Second):
			t.Fatalf("Claimable was not called: %s", what)
			return time.Time{}
		}
	}
	drain := func() {
		for {
			select {
			case <-told:
			default:
				return
			}
		}
	}
	await("coming to lead") // the requests that waited for a leader
	submitJobs(t, db, 1, "acme")
	l.Wake()
	await("a submission")
	jobs, err := l.Claim(ctx, claimParams("e", "i", 1))
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	drain()
	_, err = l.Report(ctx, []journal.Report{{Kind: journal.Ended, Item: journal.Item{Group: "acme", ID: jobs[0].Ref.ID, Attempt: 1, Executor: "e", Instance: "i", Outcome: journal.OutcomeSuccess}}})
	require.NoError(t, err)
	l.Wake()
	await("an end, which frees a place")

	drain()
	runAt := time.Now().Add(300 * time.Millisecond)
	body, err := journal.Encode([]journal.Item{{Group: "acme", ID: "later", Task: "t", RunAt: runAt.UnixMicro()}})
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	l.Wake()
	await("the delayed job's submission")
	require.False(t, await("the delayed job's time").Before(runAt), "told before the delayed job was due")
}

// TestALeaderPausesGroupsAndSetsPriorities: a paused group's jobs are not
// claimed until it is resumed (pausing twice changes nothing), and a job
// raised to high is claimed before its group's older low jobs.
func TestALeaderPausesGroupsAndSetsPriorities(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 6, "acme", "globex")
	l := leading(t, db, "c1")
	changed, err := l.Pause(ctx, "acme", true)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = l.Pause(ctx, "acme", true)
	require.NoError(t, err)
	require.False(t, changed)
	_, err = l.Pause(ctx, "no such group!", true)
	require.ErrorContains(t, err, "group")

	p := claimParams("e", "i", 10)
	jobs, err := l.Claim(ctx, p)
	require.NoError(t, err)
	var groups []string
	for _, j := range jobs {
		groups = append(groups, j.Ref.Group)
	}
	require.Equal(t, []string{"globex", "globex", "globex"}, groups, "acme is paused")

	// acme's jobs are j00, j02, j04, all low: once j04 is high, the next
	// two of acme are j00 and j04 (the counting scheme asks for one low
	// and one high), where they would be j00 and j02.
	out, err := l.SetPriority(ctx, []fairway.JobRef{{Group: "acme", ID: "j04"}, {Group: "acme", ID: "nope"}, {Group: "globex", ID: "j01"}}, fairway.PriorityHigh)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true}, out, "a held job's priority changes too")
	_, err = l.SetPriority(ctx, nil, "urgent")
	require.ErrorContains(t, err, "priority")
	changed, err = l.Pause(ctx, "acme", false)
	require.NoError(t, err)
	require.True(t, changed)
	p.Limit, p.Groups = 2, []string{"acme"}
	jobs, err = l.Claim(ctx, p)
	require.NoError(t, err)
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.Ref.ID)
	}
	require.ElementsMatch(t, []string{"j00", "j04"}, ids)
}

// TestALeaderRetriesByHand: a failed or cancelled job is retried from its
// record (its arguments and fields as submitted, its attempts going on,
// its retries afresh); one that succeeded or still lives is not, one
// never known is not found; a retried job with dependencies waits for
// them again and is released from their records; its record is replaced
// at its next end.
func TestALeaderRetriesByHand(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	body, err := journal.Encode([]journal.Item{
		{Group: "g", ID: "ok", Task: "t", Priority: "low"},
		{Group: "g", ID: "bad", Task: "t", Priority: "high", Args: []byte(`{"n":7}`), Tracker: "tr"},
		{Group: "g", ID: "dep", Task: "t", Priority: "low", Waits: []string{"ok"}},
		{Group: "g", ID: "live", Task: "u", Priority: "low"},
	})
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	l := leading(t, db, "c1")
	p := claimParams("e", "i", 2)
	jobs, err := l.Claim(ctx, p)
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	_, err = l.Cancel(ctx, []fairway.JobRef{{Group: "g", ID: "dep"}}, "not now")
	require.NoError(t, err)
	end := func(id string, attempt int32, outcome string) {
		applied, err := l.Report(ctx, []journal.Report{{Kind: journal.Ended, Item: journal.Item{Group: "g", ID: id, Attempt: attempt, Executor: "e", Instance: "i", Outcome: outcome, Error: "e" + fmt.Sprint(attempt)}}})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, applied)
	}
	// Both in one batch of reports: their records are one batch.
	applied, err := l.Report(ctx, []journal.Report{
		{Kind: journal.Ended, Item: journal.Item{Group: "g", ID: "ok", Attempt: 1, Executor: "e", Instance: "i", Outcome: journal.OutcomeSuccess}},
		{Kind: journal.Ended, Item: journal.Item{Group: "g", ID: "bad", Attempt: 1, Executor: "e", Instance: "i", Outcome: journal.OutcomeError, Error: "e1"}},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, applied)
	var submitted time.Time
	require.NoError(t, db.QueryRow(ctx, `SELECT submitted FROM fairway_job WHERE id = 'bad'`).Scan(&submitted))

	ref := func(id string) fairway.JobRef { return fairway.JobRef{Group: "g", ID: id} }
	out, err := l.Retry(ctx, []fairway.JobRef{ref("bad"), ref("dep"), ref("ok"), ref("nope"), ref("live")})
	require.NoError(t, err)
	require.Equal(t, []journal.RetryOutcome{journal.RetryDone, journal.RetryDone, journal.RetryNotEnded, journal.RetryNotFound, journal.RetryNotEnded}, out)
	records := func(id string) (n int) {
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_job WHERE id = $1`, id).Scan(&n))
		return n
	}
	require.Zero(t, records("bad"), "a job retried by hand is live again: its record left its batch")
	require.Equal(t, 1, records("ok"), "the other record of its batch stays")
	require.Eventually(t, func() bool {
		l.Wake() // dep's dependency is resolved from ok's record
		st := fairway.State("")
		l.View(func(s *journal.State, _ journal.Lease) {
			if j := s.Jobs.Get(ref("dep")); j != nil {
				st = j.State()
			}
		})
		return st == fairway.StateWaiting
	}, 10*time.Second, 5*time.Millisecond, "dep released: ok succeeded")
	require.True(t, l.View(func(s *journal.State, _ journal.Lease) {
		bad := s.Jobs.Get(ref("bad"))
		require.Equal(t, fairway.StateWaiting, bad.State())
		require.EqualValues(t, 1, bad.Attempt, "its attempts go on counting")
		require.Zero(t, bad.Retries)
		require.Equal(t, "high", bad.Priority())
	}))
	p.Groups, p.Limit = []string{"g"}, 1
	jobs, err = l.Claim(ctx, p)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, "bad", jobs[0].Ref.ID, "high first")
	require.EqualValues(t, 2, jobs[0].Attempt)
	require.JSONEq(t, `{"n":7}`, string(jobs[0].Args))
	require.True(t, submitted.Equal(jobs[0].Submitted), "a retry by hand keeps the job's submission time: %s, not %s", submitted, jobs[0].Submitted)
	end("bad", 2, journal.OutcomeError)
	var attempt, retries int
	var tracker, why string
	var resubmitted time.Time
	require.NoError(t, db.QueryRow(ctx, `SELECT attempt, retries, tracker, error, submitted FROM fairway_job WHERE id = 'bad'`).Scan(&attempt, &retries, &tracker, &why, &resubmitted))
	require.Equal(t, []any{2, 1, "tr", "e2"}, []any{attempt, retries, tracker, why}, "the record of its second end")
	require.Equal(t, 1, records("bad"), "one record, of its second end")
	require.True(t, submitted.Equal(resubmitted), "the record keeps the first submission's time")
}

// TestTheLeadersVerbsKeepEveryJobLiveOrRecorded drives the leader's verbs
// at random (submissions by other coordinators, claims of two instances,
// batches of reports with stale ones among them, cancels, releases
// counted or not, retries by hand, priorities, pauses, expiry, dependents
// resolved) and after every step checks that its state is the fold of
// PostgreSQL's rows, and that every job submitted is live in it or has
// ended with its record (a job retried by hand keeps its last record
// while it lives again): none lost, none ended without its record.
func TestTheLeadersVerbsKeepEveryJobLiveOrRecorded(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			ctx := t.Context()
			db := pool(t)
			rng := rand.New(rand.NewPCG(seed, 34)) //nolint:gosec // a test's reproducible randomness
			l := leading(t, db, "c1")
			groups := []string{"acme", "globex"}
			var submitted []fairway.JobRef
			retried := map[fairway.JobRef]bool{}
			submit := func() {
				var items []journal.Item
				for range 1 + rng.IntN(5) {
					ref := fairway.JobRef{Group: groups[rng.IntN(2)], ID: fmt.Sprintf("j%03d", len(submitted))}
					it := journal.Item{Group: ref.Group, ID: ref.ID, Task: "t", Priority: "low", MaxRetries: rng.Int32N(2), Args: []byte(`{}`)}
					if len(submitted) > 0 && rng.IntN(4) == 0 {
						if dep := submitted[rng.IntN(len(submitted))]; dep.Group == ref.Group {
							it.Waits = []string{dep.ID}
						}
					}
					if rng.IntN(8) == 0 {
						it.ExpiresAt = time.Now().Add(-time.Second).UnixMicro()
					}
					submitted = append(submitted, ref)
					items = append(items, it)
				}
				body, err := journal.Encode(items)
				require.NoError(t, err)
				require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
				l.Wake()
			}
			view := func() (s *journal.State) {
				require.True(t, l.View(func(st *journal.State, _ journal.Lease) {
					snap, err := st.Snapshot()
					require.NoError(t, err)
					s, err = journal.Restore(snap)
					require.NoError(t, err)
				}))
				return s
			}
			pick := func(n int) []fairway.JobRef {
				var out []fairway.JobRef
				for range n {
					if len(submitted) > 0 {
						out = append(out, submitted[rng.IntN(len(submitted))])
					}
				}
				return out
			}
			instances := []string{"i1", "i2"}
			for step := range 150 {
				switch r := rng.IntN(20); {
				case r < 4 || len(submitted) == 0:
					submit()
				case r < 8:
					_, err := l.Claim(ctx, claimParams("e", instances[rng.IntN(2)], 1+rng.IntN(4)))
					require.NoError(t, err)
				case r < 13:
					s := view()
					var reports []journal.Report
					for ref, j := range s.Jobs.All() {
						if j.Holder == nil || rng.IntN(2) == 0 {
							continue
						}
						it := journal.Item{Group: ref.Group, ID: ref.ID, Attempt: j.Attempt - rng.Int32N(2), Executor: j.Holder.Executor, Instance: j.Holder.Instance}
						kind := []journal.Kind{journal.Started, journal.Ended, journal.Ended, journal.Released}[rng.IntN(4)]
						it.Outcome = []string{journal.OutcomeSuccess, journal.OutcomeError, journal.OutcomeSnooze, journal.OutcomeCancelled}[rng.IntN(4)]
						it.Counted = rng.IntN(2) == 0
						it.GiveBack = kind == journal.Released && !it.Counted && rng.IntN(2) == 0
						reports = append(reports, journal.Report{Kind: kind, Item: it})
					}
					_, err := l.Report(ctx, reports)
					require.NoError(t, err)
				case r < 14:
					_, err := l.Cancel(ctx, pick(2), "by hand")
					require.NoError(t, err)
				case r < 15:
					_, err := l.Release(ctx, map[journal.Instance]bool{{Executor: "e", Instance: instances[rng.IntN(2)]}: true}, rng.IntN(2) == 0, "gone")
					require.NoError(t, err)
				case r < 17:
					refs := pick(2)
					out, err := l.Retry(ctx, refs)
					require.NoError(t, err)
					for i, o := range out {
						if o == journal.RetryDone {
							retried[refs[i]] = true
						}
					}
				case r < 18:
					_, err := l.SetPriority(ctx, pick(1), fairway.PriorityHigh)
					require.NoError(t, err)
				default:
					_, err := l.Pause(ctx, groups[rng.IntN(2)], rng.IntN(2) == 0)
					require.NoError(t, err)
				}
				// The leader catches up (submissions folded, dependents
				// resolved, expiry): its state is then the fold of
				// PostgreSQL's rows.
				var s, fresh *journal.State
				require.Eventually(t, func() bool {
					l.Wake()
					s, fresh = view(), journal.NewState()
					_, err := (&journal.Tail{}).Fold(ctx, db, fresh)
					require.NoError(t, err)
					return reflect.DeepEqual(fresh.Jobs, s.Jobs)
				}, 10*time.Second, 5*time.Millisecond, "step %d: the leader's jobs never became the fold of PostgreSQL's rows", step)
				// The jobs live and the records, in one snapshot of
				// PostgreSQL: the leader goes on (expiry, resolutions)
				// while the test reads, and a row that ends a job commits
				// with its record, so any one snapshot must hold either.
				tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
				require.NoError(t, err)
				inSnapshot := journal.NewState()
				_, err = (&journal.Tail{}).Fold(ctx, tx, inSnapshot)
				require.NoError(t, err)
				rows, err := tx.Query(ctx, `SELECT group_name, id, state FROM fairway_job`)
				require.NoError(t, err)
				recorded := map[fairway.JobRef]string{}
				var ref fairway.JobRef
				var st string
				_, err = pgx.ForEachRow(rows, []any{&ref.Group, &ref.ID, &st}, func() error { recorded[ref] = st; return nil })
				require.NoError(t, err)
				require.NoError(t, tx.Rollback(ctx))
				for _, ref := range submitted {
					live := inSnapshot.Jobs.Get(ref) != nil
					state, has := recorded[ref]
					switch {
					case live && has:
						require.True(t, retried[ref], "step %d: %s/%s lives and has a record, and was never retried", step, ref.Group, ref.ID)
					case !live && !has:
						t.Fatalf("step %d: %s/%s is neither live nor recorded", step, ref.Group, ref.ID)
					case has:
						require.Contains(t, []string{"success", "failed", "cancelled"}, state, "step %d: %s/%s", step, ref.Group, ref.ID)
					}
				}
			}
			require.NotEmpty(t, submitted)
		})
	}
}

// TestALongFoldKeepsTheLease: the leader's loop is held three times the
// lease's TTL (its publishing blocks, as a fold of thousands of
// dependents on a loaded machine did); the lease is renewed beside the
// loop, so c2, following, does not take over, and c1 leads on with the
// same epoch. Renewed in the loop, c1 lost the lease to c2 meanwhile.
func TestALongFoldKeepsTheLease(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	const ttl = time.Second
	blocked, unblocked := make(chan struct{}), make(chan struct{})
	first := true
	c1 := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: ttl, Renew: 100 * time.Millisecond, Poll: 10 * time.Millisecond,
		Publish: func(context.Context, []fairway.Event) error {
			if first {
				first = false
				close(blocked)
				time.Sleep(3 * ttl) // the loop held: the fault itself
				close(unblocked)
			}
			return nil
		}})
	go c1.Run(ctx)
	var c1Lease journal.Lease
	require.Eventually(t, func() bool { return c1.View(func(_ *journal.State, l journal.Lease) { c1Lease = l }) }, 10*time.Second, 10*time.Millisecond, "c1 leads")
	c2 := journal.NewLeader(db, journal.LeaderConfig{Holder: "c2", TTL: ttl, Renew: 100 * time.Millisecond, Poll: 10 * time.Millisecond})
	go c2.Run(ctx)

	body, err := journal.Encode([]journal.Item{{Group: "g", ID: "j", Task: "t"}})
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	c1.Wake()
	<-blocked
	<-unblocked
	require.False(t, c2.View(func(*journal.State, journal.Lease) {}), "c2 took the lease while c1's loop was held")
	var epoch int64
	require.NoError(t, db.QueryRow(ctx, `SELECT epoch FROM fairway_journal_lease WHERE partition = 0`).Scan(&epoch))
	require.Equal(t, c1Lease.Epoch, epoch, "the lease changed hands")
	require.Eventually(t, func() bool {
		var n int
		ok := c1.View(func(s *journal.State, l journal.Lease) { n = s.Jobs.Len(); c1Lease = l })
		return ok && n == 1
	}, 10*time.Second, 10*time.Millisecond, "c1 leads on")
	require.Equal(t, epoch, c1Lease.Epoch)
}

// TestASnapshotIsWorthItsSize: past SnapshotEvery (10 s) a snapshot is
// due once the changes folded since are an eighth of the state's jobs,
// so that a million waiting jobs are not written again every 10 s for a
// few changes; a small state is written every 10 s as before, and
// SnapshotRows rows take one whatever the size.
func TestASnapshotIsWorthItsSize(t *testing.T) {
	for _, c := range []struct {
		rows, changes, jobs int
		elapsed             time.Duration
		due                 bool
	}{
		{rows: 10, changes: 1_000, jobs: 1_000_000, elapsed: 11 * time.Second, due: false},
		{rows: 10, changes: 125_000, jobs: 1_000_000, elapsed: 11 * time.Second, due: true},
		{rows: 10, changes: 125_000, jobs: 1_000_000, elapsed: 9 * time.Second, due: false},
		{rows: 100_000, changes: 100_000, jobs: 1_000_000, elapsed: time.Second, due: true},
		{rows: 3, changes: 20, jobs: 100, elapsed: 11 * time.Second, due: true},
		{rows: 1, changes: 0, jobs: 0, elapsed: 11 * time.Second, due: true},
		{rows: 0, changes: 0, jobs: 100, elapsed: time.Hour, due: false},
	} {
		require.Equal(t, c.due, journal.SnapshotDue(c.rows, c.changes, c.jobs, c.elapsed), "%+v", c)
	}
}

// TestManyEndsAreRecordedInSeveralBatches: an append that ends more jobs
// than a batch of records holds (5,000 cancelled at once) writes their
// records in several rows of at most RecordsPerBatch, each record found
// at its place: one row would have placed records past 2^20 into the
// next row's sequence numbers, and made a read of one parse megabytes.
func TestManyEndsAreRecordedInSeveralBatches(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	const jobs = 5000
	require.Greater(t, jobs, journal.RecordsPerBatch, "one batch holds them all: the test tests nothing")
	items := make([]journal.Item, jobs)
	refs := make([]fairway.JobRef, jobs)
	for i := range items {
		items[i] = journal.Item{Group: "g", ID: fmt.Sprintf("j%05d", i), Task: "t"}
		refs[i] = fairway.JobRef{Group: "g", ID: items[i].ID}
	}
	body, err := journal.Encode(items)
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	l := leading(t, db, "c1")
	_, err = l.Cancel(ctx, refs, "all at once")
	require.NoError(t, err)

	var rows, most, records, seqs int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*), max(json_array_length(jobs)), sum(json_array_length(jobs)) FROM fairway_record`).Scan(&rows, &most, &records))
	require.Equal(t, jobs, records)
	require.Equal(t, (jobs+journal.RecordsPerBatch-1)/journal.RecordsPerBatch, rows)
	require.LessOrEqual(t, most, journal.RecordsPerBatch)
	require.NoError(t, db.QueryRow(ctx, `SELECT count(DISTINCT seq) FROM fairway_record_job`).Scan(&seqs))
	require.Equal(t, jobs, seqs)
	for _, id := range []string{"j00000", "j04095", "j04096", "j04999"} {
		var state string
		require.NoError(t, db.QueryRow(ctx, `SELECT state FROM fairway_records_of('g', ARRAY[$1])`, id).Scan(&state), id)
		require.Equal(t, "cancelled", state, id)
	}
}

// TestABatchOfRecordsHoldsOneOutcome: an append that ends jobs with
// different outcomes writes a batch of records for each, so that
// retention, which keeps successes and failures for different times,
// deletes whole batches (a mixed batch was written again without its
// successes, every record of it parsed twice).
func TestABatchOfRecordsHoldsOneOutcome(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	var items []journal.Item
	for i := range 6 {
		items = append(items, journal.Item{Group: "g", ID: fmt.Sprint("j", i), Task: "t"})
	}
	submit(t, db, items)
	l := leading(t, db, "c1")
	jobs, err := l.Claim(ctx, claimParams("e", "i", 10))
	require.NoError(t, err)
	require.Len(t, jobs, 6)
	var reports []journal.Report
	for i := range 6 {
		it := journal.Item{Group: "g", ID: fmt.Sprint("j", i), Attempt: 1, Executor: "e", Instance: "i", Outcome: journal.OutcomeSuccess}
		if i%2 == 1 {
			it.Outcome, it.Error = journal.OutcomeError, "boom" // no retries left
		}
		reports = append(reports, journal.Report{Kind: journal.Ended, Item: it})
	}
	applied, err := l.Report(ctx, reports)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true, true, true}, applied)

	rows, err := db.Query(ctx, `SELECT s_states, finished FROM fairway_record ORDER BY id`)
	require.NoError(t, err)
	type batch struct {
		States   []string
		Finished time.Time
	}
	batches, err := pgx.CollectRows(rows, pgx.RowToStructByPos[batch])
	require.NoError(t, err)
	require.Len(t, batches, 2, "one batch an outcome: %v", batches)
	require.Equal(t, batches[0].Finished, batches[1].Finished, "written by one append")
	require.Equal(t, []string{"success", "success", "success"}, batches[0].States)
	require.Equal(t, []string{"failed", "failed", "failed"}, batches[1].States)
	for i := range 6 {
		var state string
		require.NoError(t, db.QueryRow(ctx, `SELECT state FROM fairway_records_of('g', ARRAY[$1])`, fmt.Sprint("j", i)).Scan(&state))
		require.Equal(t, map[bool]string{true: "failed", false: "success"}[i%2 == 1], state)
	}
}

// TestAStoppingInstanceGivesItsAttemptsBack: the jobs an instance releases
// as it stops (GiveBack) go back to waiting under the attempt before, so
// the next claim runs them under the number the released claim had; a
// report of the released claim, sent again, changes nothing; a release
// without GiveBack keeps the attempt.
func TestAStoppingInstanceGivesItsAttemptsBack(t *testing.T) {
	ctx := t.Context()
	_, l, jobs := claimedJobs(t, "acme", "stopping", 4)
	released := func(j journal.ClaimedJob, instance string, giveBack bool) journal.Report {
		return journal.Report{Kind: journal.Released, Item: journal.Item{Group: j.Ref.Group, ID: j.Ref.ID, Attempt: j.Attempt,
			Executor: "e", Instance: instance, Error: "released", GiveBack: giveBack}}
	}
	reports := []journal.Report{released(jobs[0], "stopping", true), released(jobs[1], "stopping", true), released(jobs[2], "stopping", false)}
	applied, err := l.Report(ctx, reports)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true}, applied)
	require.True(t, l.View(func(s *journal.State, _ journal.Lease) {
		require.Zero(t, s.Jobs.Get(jobs[0].Ref).Attempt)
		require.Zero(t, s.Jobs.Get(jobs[1].Ref).Attempt)
		require.EqualValues(t, 1, s.Jobs.Get(jobs[2].Ref).Attempt, "released without giving it back")
	}))

	again, err := l.Claim(ctx, claimParams("e", "next", 4))
	require.NoError(t, err)
	attempts := map[string]int32{}
	for _, j := range again {
		attempts[j.Ref.ID] = j.Attempt
	}
	require.Equal(t, map[string]int32{jobs[0].Ref.ID: 1, jobs[1].Ref.ID: 1, jobs[2].Ref.ID: 2}, attempts)

	// The stopping instance's release, sent again: not the next claim's.
	applied, err = l.Report(ctx, reports[:1])
	require.NoError(t, err)
	require.Equal(t, []bool{false}, applied)
	require.True(t, l.View(func(s *journal.State, _ journal.Lease) {
		require.Equal(t, fairway.StateScheduled, s.Jobs.Get(jobs[0].Ref).State())
	}))
}

// claimedJobs submits n jobs of group, has a leader claim them all for
// instance i of executor "e", and returns the database, the leader and
// the jobs.
func claimedJobs(t *testing.T, group, instance string, n int) (*pgxpool.Pool, *journal.Leader, []journal.ClaimedJob) {
	t.Helper()
	db := pool(t)
	submitJobs(t, db, n, group)
	l := leading(t, db, "c1")
	jobs, err := l.Claim(t.Context(), claimParams("e", instance, n))
	require.NoError(t, err)
	require.Len(t, jobs, n)
	return db, l, jobs
}

// TestALeaderThatCannotReachItsDatabaseTriesItAtItsProbes: once a call
// to its database failed as unreachable (LeaderConfig.Unreachable),
// claims and reports fail at once with ErrUnreachable, trying nothing;
// the leader's next probe (its poll, here: the renewals are an hour
// apart) finds the database answering, and it serves again. Another
// error changes nothing.
func TestALeaderThatCannotReachItsDatabaseTriesItAtItsProbes(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 4, "acme")
	cut := errors.New("test: the connection was cut")
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: time.Hour, Renew: time.Hour, Poll: 10 * time.Millisecond,
		Unreachable: func(err error) bool { return errors.Is(err, cut) }})
	go l.Run(ctx)
	require.Eventually(t, func() bool { return l.View(func(*journal.State, journal.Lease) {}) }, 10*time.Second, 5*time.Millisecond, "c1 leads")

	l.Observe(errors.New("test: a statement refused"))
	require.True(t, l.Reachable(), "an error that is not unreachability")
	l.Observe(fmt.Errorf("reading the journal: %w", cut))
	require.False(t, l.Reachable())
	_, err := l.Claim(ctx, claimParams("e", "i", 4))
	require.ErrorIs(t, err, journal.ErrUnreachable)
	_, err = l.Report(ctx, []journal.Report{{Kind: journal.Ended, Item: journal.Item{Group: "acme", ID: "j00", Attempt: 1, Executor: "e", Instance: "i", Outcome: journal.OutcomeSuccess}}})
	require.ErrorIs(t, err, journal.ErrUnreachable)

	require.Eventually(t, l.Reachable, 10*time.Second, 5*time.Millisecond, "a probe finds the database answering")
	jobs, err := l.Claim(ctx, claimParams("e", "i", 4))
	require.NoError(t, err)
	require.Len(t, jobs, 4)
}

// TestALeaderBoundsTheCallsItsDatabaseDoesNotAnswer: the partition's
// database stops answering while its host still takes the bytes (a
// primary frozen: pgtest.Freezer). The leader's fold that waits on it is
// Stalled once it has waited longer than a fold takes, and fails once
// its bound (CallTimeout) runs out, with ErrNoAnswer: the database is
// then unreachable, and a claim fails at once, trying nothing. Once the
// database answers again a probe finds it, and the leader serves again.
// Unbounded, the fold held the leader's lock, and every claim and read
// behind it, for as long as the database stayed frozen.
func TestALeaderBoundsTheCallsItsDatabaseDoesNotAnswer(t *testing.T) {
	ctx := t.Context()
	freezer, through := pgtest.NewFreezer(t, pgtest.NewDB(t))
	db, err := pgxpool.New(ctx, through)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	submitJobs(t, db, 4, "acme")
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: time.Hour, Renew: time.Hour, Poll: 10 * time.Millisecond,
		CallTimeout: time.Second})
	go l.Run(ctx)
	require.Eventually(t, func() bool { return l.View(func(*journal.State, journal.Lease) {}) }, 10*time.Second, 5*time.Millisecond, "c1 leads")

	freezer.Freeze()
	stalled := false
	require.Eventually(t, func() bool {
		stalled = stalled || l.Stalled()
		return !l.Reachable()
	}, 10*time.Second, 5*time.Millisecond, "a call that got no answer within its bound marks the database unreachable")
	require.True(t, stalled, "the fold waiting on the database was stalled before its bound ran out")
	_, err = l.Claim(ctx, claimParams("e", "i", 4))
	require.ErrorIs(t, err, journal.ErrUnreachable, "tried nothing")

	freezer.Thaw()
	require.Eventually(t, l.Reachable, 10*time.Second, 5*time.Millisecond, "a probe finds the database answering")
	jobs, err := l.Claim(ctx, claimParams("e", "i", 4))
	require.NoError(t, err)
	require.Len(t, jobs, 4)
}
