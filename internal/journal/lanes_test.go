package journal_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClaimsAndReportsInFlightTogetherFoldAlike: a claim and a batch of
// reports may be appended together, the leader's lock let go over their
// round trips (Leader.claims, Leader.reports), while cancels, releases and
// submissions come between them. Claims, reports and the rest run at
// once, from their own goroutines, for some hundreds of rounds: however
// the leader read the rows as they committed, its state must be the fold
// of PostgreSQL's rows read at once in id order (a successor's), and no
// attempt of a job is handed out twice.
func TestClaimsAndReportsInFlightTogetherFoldAlike(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	l := leading(t, db, "c1")
	groups := []string{"acme", "globex", "initech"}
	var mu sync.Mutex
	n := 0
	submit := func(k int) {
		mu.Lock()
		items := make([]journal.Item, k)
		for i := range items {
			items[i] = journal.Item{Group: groups[n%len(groups)], ID: fmt.Sprintf("j%04d", n), Task: "t", Priority: "low", MaxRetries: 1}
			n++
		}
		mu.Unlock()
		body, err := journal.Encode(items)
		if assert.NoError(t, err) {
			assert.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
		}
		l.Wake()
	}
	submit(300)
	// The claims start once the leader folded them: a claim does not read
	// the tail first, and 200 claims in a row may all come before the
	// catch-up (the test then checks nothing: seen in CI).
	require.Eventually(t, func() bool {
		l.Wake()
		folded := 0
		l.View(func(s *journal.State, _ journal.Lease) { folded = s.Jobs.Len() })
		return folded == 300
	}, 10*time.Second, time.Millisecond)
	held := func(rng *rand.Rand) []journal.Report {
		var out []journal.Report
		l.View(func(s *journal.State, _ journal.Lease) {
			for ref, j := range s.Jobs.All() {
				if j.Holder == nil || rng.IntN(3) == 0 {
					continue
				}
				it := journal.Item{Group: ref.Group, ID: ref.ID, Attempt: j.Attempt, Executor: j.Holder.Executor, Instance: j.Holder.Instance}
				switch r := rng.IntN(6); {
				case j.State() == fairway.StateScheduled && r < 2:
					out = append(out, journal.Report{Kind: journal.Started, Item: it})
				case r < 4:
					it.Outcome = journal.OutcomeSuccess
					out = append(out, journal.Report{Kind: journal.Ended, Item: it})
				case r < 5:
					it.Outcome = journal.OutcomeError
					it.RunAt = time.Now().UnixMicro()
					out = append(out, journal.Report{Kind: journal.Ended, Item: it})
				default:
					it.Counted = rng.IntN(2) == 0
					out = append(out, journal.Report{Kind: journal.Released, Item: it})
				}
			}
		})
		return out
	}
	type attempt struct {
		ref     fairway.JobRef
		attempt int32
	}
	handed := map[attempt]int{}
	var wg sync.WaitGroup
	const rounds = 200
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 31)) //nolint:gosec // a test's reproducible randomness
		for i := range rounds {
			jobs, err := l.Claim(ctx, claimParams("e", fmt.Sprint("i", i%2), 1+rng.IntN(12)))
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			for _, j := range jobs {
				handed[attempt{j.Ref, j.Attempt}]++
			}
			mu.Unlock()
		}
	})
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(2, 31)) //nolint:gosec // a test's reproducible randomness
		for range rounds {
			if reports := held(rng); len(reports) > 0 {
				if _, err := l.Report(ctx, reports); !assert.NoError(t, err) {
					return
				}
			}
		}
	})
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(3, 31)) //nolint:gosec // a test's reproducible randomness
		for i := range rounds / 4 {
			switch i % 3 {
			case 0:
				var refs []fairway.JobRef
				for range 4 {
					mu.Lock()
					id := rng.IntN(n)
					mu.Unlock()
					refs = append(refs, fairway.JobRef{Group: groups[id%len(groups)], ID: fmt.Sprintf("j%04d", id)})
				}
				_, err := l.Cancel(ctx, refs, "by hand")
				assert.NoError(t, err)
			case 1:
				submit(10)
			default:
				_, err := l.Release(ctx, map[journal.Instance]bool{{Executor: "e", Instance: fmt.Sprint("i", rng.IntN(2))}: true}, false, "stopping")
				assert.NoError(t, err)
			}
		}
	})
	wg.Wait()
	require.False(t, t.Failed())
	for a, k := range handed {
		require.Equal(t, 1, k, "attempt %d of %s/%s was handed out %d times", a.attempt, a.ref.Group, a.ref.ID, k)
	}
	require.Greater(t, len(handed), rounds, "the claims handed out too little to test anything")
	copyOf := func(s *journal.State) *journal.State {
		snap, err := s.Snapshot()
		require.NoError(t, err)
		c, err := journal.Restore(snap)
		require.NoError(t, err)
		return claimsHeld(c)
	}
	var leader, fresh *journal.State
	require.Eventually(t, func() bool {
		l.Wake()
		require.True(t, l.View(func(s *journal.State, _ journal.Lease) { leader = copyOf(s) }))
		f := journal.NewState()
		_, err := (&journal.Tail{}).Fold(ctx, db, f)
		require.NoError(t, err)
		fresh = copyOf(f)
		return assert.ObjectsAreEqual(fresh, leader)
	}, 10*time.Second, 5*time.Millisecond, "the leader's state never became the fold of PostgreSQL's rows in id order")
	var ended int
	for a := range handed {
		if leader.Jobs.Get(a.ref) == nil {
			ended++
		}
	}
	require.Positive(t, ended, "no job ended: the reports tested nothing")
}

// TestAClaimTakesArgumentsFromRecentRowsOrPostgreSQL: the leader keeps
// the bodies of the submitted rows folded last, up to RecentBytes, and a
// claim takes its jobs' arguments from them; the jobs of a row no longer
// kept are read from PostgreSQL. Three rows, a bound that keeps the last
// one only: every claimed job carries its own arguments and its row's
// time, whichever way they came.
func TestAClaimTakesArgumentsFromRecentRowsOrPostgreSQL(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	var sizes []int
	for r := range 3 {
		items := make([]journal.Item, 20)
		for i := range items {
			id := fmt.Sprintf("r%dj%02d", r, i)
			items[i] = journal.Item{Group: "acme", ID: id, Task: "t", Priority: "low", Args: fmt.Appendf(nil, `{"job":%q}`, id)}
		}
		body, err := journal.Encode(items)
		require.NoError(t, err)
		sizes = append(sizes, len(body))
		require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	}
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: time.Hour, Renew: time.Hour, Poll: time.Hour, RecentBytes: sizes[2] + 1})
	go l.Run(ctx)
	require.Eventually(t, func() bool {
		n := 0
		l.View(func(s *journal.State, _ journal.Lease) { n = s.Jobs.Len() })
		return n == 60
	}, 10*time.Second, 5*time.Millisecond)
	var at []time.Time
	rows, err := db.Query(ctx, `SELECT at FROM fairway_journal WHERE kind = 'submitted' ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var a time.Time
		require.NoError(t, rows.Scan(&a))
		at = append(at, a)
	}
	require.NoError(t, rows.Err())
	require.Len(t, at, 3)
	jobs, err := l.Claim(ctx, claimParams("e", "i", 100))
	require.NoError(t, err)
	require.Len(t, jobs, 60)
	for _, j := range jobs {
		require.JSONEq(t, fmt.Sprintf(`{"job":%q}`, j.Ref.ID), string(j.Args), "job %s", j.Ref.ID)
		r := int(j.Ref.ID[1] - '0')
		index, err := strconv.Atoi(j.Ref.ID[3:])
		require.NoError(t, err)
		// Its row's time, plus its index in microseconds: a batch's jobs in
		// their order.
		want := at[r].Add(time.Duration(index) * time.Microsecond)
		require.True(t, j.Submitted.Equal(want), "job %s: submitted %v, its row's time %v", j.Ref.ID, j.Submitted, at[r])
	}
}

// TestARowReadForAClaimIsKeptForTheNext: a claim of jobs whose row the
// leader no longer keeps reads it from PostgreSQL and keeps it in turn
// (in place of the oldest kept), so that the next claims of that row's
// jobs (a backlog in many groups is claimed oldest first, a hundred
// groups at a time from one row) take their arguments from memory.
func TestARowReadForAClaimIsKeptForTheNext(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	var ids []int64
	size := 0
	for r := range 3 {
		items := make([]journal.Item, 20)
		for i := range items {
			id := fmt.Sprintf("r%dj%02d", r, i)
			items[i] = journal.Item{Group: fmt.Sprint("g", i), ID: id, Task: "t", Args: fmt.Appendf(nil, `{"job":%q}`, id)}
		}
		body, err := journal.Encode(items)
		require.NoError(t, err)
		size = max(size, len(body))
		require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	}
	require.NoError(t, db.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM fairway_journal WHERE kind = 'submitted'`).Scan(&ids))
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: time.Hour, Renew: time.Hour, Poll: time.Hour, RecentBytes: size + 1})
	runLeader(t, l)
	require.Eventually(t, func() bool {
		n := 0
		l.View(func(s *journal.State, _ journal.Lease) { n = s.Jobs.Len() })
		return n == 60
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, ids[2:], l.RecentRows(), "the last row folded is kept, alone")
	for range 2 {
		jobs, err := l.Claim(ctx, claimParams("e", "i", 5))
		require.NoError(t, err)
		require.Len(t, jobs, 5)
		for _, j := range jobs {
			require.Equal(t, "r0", j.Ref.ID[:2], "oldest first")
			require.JSONEq(t, fmt.Sprintf(`{"job":%q}`, j.Ref.ID), string(j.Args))
		}
		require.Equal(t, ids[:1], l.RecentRows(), "the row read for the claim is kept in place of the last folded")
	}
}
