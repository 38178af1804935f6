package journal_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// handOverWorld is a leader with a state worth a hand-over: jobs of task
// u waiting (which an executor of task t cannot run), a claim of one
// that moved the cursor to globex, and a job holding the tracker "tr".
func handOverWorld(t *testing.T) (*pgxpool.Pool, *journal.Leader) {
	t.Helper()
	ctx := t.Context()
	db := pool(t)
	var items []journal.Item
	for i, g := range []string{"acme", "globex", "hooli", "globex"} {
		items = append(items, journal.Item{Group: g, ID: fmt.Sprintf("u%d", i), Task: "u", Priority: "low"})
	}
	items = append(items, journal.Item{Group: "acme", ID: "holder", Task: "u", Priority: "low", Tracker: "tr"})
	submit(t, db, items)
	l := leading(t, db, "c1")
	_, err := l.Has(ctx, fairway.JobRef{Group: "acme", ID: "holder"}) // folded
	require.NoError(t, err)
	p := claimParams("e", "other", 1)
	p.Tasks = []string{"u"}
	claimed, err := l.Claim(ctx, p)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	return db, l
}

// submit stores items as a submitted row, with their ids taken, as
// ingest stores them.
func submit(t *testing.T, db *pgxpool.Pool, items []journal.Item) {
	t.Helper()
	ctx := t.Context()
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	kept, err := journal.Submit(ctx, tx, 0, items)
	require.NoError(t, err)
	require.Len(t, kept, len(items))
	require.NoError(t, tx.Commit(ctx))
}

// handOverBatch is a batch of task t in three groups: a high-priority
// job, one held by the client (pending), one due in an hour, and one
// whose tracker a live job holds (refused).
func handOverBatch() []journal.Item {
	later := time.Now().Add(time.Hour).UnixMicro()
	return []journal.Item{
		{Group: "hooli", ID: "n0", Task: "t", Priority: "low"},
		{Group: "acme", ID: "n1", Task: "t", Priority: "low"},
		{Group: "globex", ID: "n2", Task: "t", Priority: "low"},
		{Group: "acme", ID: "n3", Task: "t", Priority: "high"},
		{Group: "hooli", ID: "n4", Task: "t", Priority: "low", Pending: true},
		{Group: "globex", ID: "n5", Task: "t", Priority: "low", RunAt: later},
		{Group: "acme", ID: "n6", Task: "t", Priority: "low", Tracker: "tr"},
		{Group: "globex", ID: "n7", Task: "t", Priority: "low", Args: []byte(`{"n":7}`)},
	}
}

// TestAHandOverClaimsWhatAClaimWould: a batch handed over to an idle
// executor in its submission's transaction gives it the jobs that
// storing the batch, then claiming, gives it, in the same order, and
// leaves the same state (cursor included) as that way, and as a fold of
// PostgreSQL's rows. A taken id, a dependency, work the executor could
// take from the state, or a concurrency limit: no hand-over, and nothing
// stored.
func TestAHandOverClaimsWhatAClaimWould(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, limit := range []int{3, 10} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			t.Parallel()
			// The usual way: stored, folded, claimed.
			db, l := handOverWorld(t)
			submit(t, db, handOverBatch())
			_, err := l.Has(ctx, fairway.JobRef{Group: "acme", ID: "n1"}) // folded
			require.NoError(t, err)
			want, err := l.Claim(ctx, claimParams("e", "i", limit))
			require.NoError(t, err)
			require.NotEmpty(t, want)

			// Handed over.
			db2, l2 := handOverWorld(t)
			stored, got, err := l2.HandOver(ctx, handOverBatch(), claimParams("e", "i", limit))
			require.NoError(t, err)
			require.True(t, stored)
			require.Equal(t, refsOf(want), refsOf(got))
			for i := range got {
				require.Equal(t, want[i].Args, got[i].Args)
				require.Equal(t, want[i].Attempt, got[i].Attempt)
			}

			// The same states but for the rows' ids and times.
			var s1, s2 string
			require.True(t, l.View(func(s *journal.State, _ journal.Lease) { s1 = stateSummary(s) }))
			require.True(t, l2.View(func(s *journal.State, _ journal.Lease) { s2 = stateSummary(s) }))
			require.Equal(t, s1, s2)
			fresh := journal.NewState()
			_, err = (&journal.Tail{}).Fold(ctx, db2, fresh)
			require.NoError(t, err)
			require.True(t, l2.View(func(s *journal.State, _ journal.Lease) { require.Equal(t, fresh, s) }))
		})
	}

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		db, l := handOverWorld(t)
		rows := func() int {
			var n int
			require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_journal`).Scan(&n))
			return n
		}
		before := rows()
		p := claimParams("e", "i", 5)
		taken := []journal.Item{{Group: "acme", ID: "fresh", Task: "t"}, {Group: "acme", ID: "holder", Task: "t"}}
		stored, got, err := l.HandOver(ctx, taken, p)
		require.ErrorIs(t, err, journal.ErrNoHandOver, "an id taken")
		require.False(t, stored)
		require.Empty(t, got)
		dependent := []journal.Item{{Group: "acme", ID: "d", Task: "t", Waits: []string{"u0"}}}
		_, _, err = l.HandOver(ctx, dependent, p)
		require.ErrorIs(t, err, journal.ErrNoHandOver, "a dependency")
		busy := claimParams("e", "i", 5)
		busy.Tasks = []string{"t", "u"} // the state has u's jobs for it
		_, _, err = l.HandOver(ctx, []journal.Item{{Group: "acme", ID: "b", Task: "t"}}, busy)
		require.ErrorIs(t, err, journal.ErrNoHandOver, "work in the state")
		limited := claimParams("e", "i", 5)
		limited.ConcurrencyLimits = []fairway.Limit{{Kind: "task", Name: "t", Max: 1}}
		_, _, err = l.HandOver(ctx, []journal.Item{{Group: "acme", ID: "c", Task: "t"}}, limited)
		require.ErrorIs(t, err, journal.ErrNoHandOver, "a concurrency limit")
		require.Equal(t, before, rows(), "nothing stored")
		var ids int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_job_id WHERE id IN ('fresh', 'd', 'b', 'c')`).Scan(&ids))
		require.Zero(t, ids, "no id taken")

		// A job of t submitted and announced, not read yet: the hand-over
		// reads it first, and a claim takes it first (picked from the
		// batch alone, the later job started before it).
		submit(t, db, []journal.Item{{Group: "acme", ID: "early", Task: "t"}})
		l.WakeUnread()
		_, _, err = l.HandOver(ctx, []journal.Item{{Group: "acme", ID: "later", Task: "t"}}, p)
		require.ErrorIs(t, err, journal.ErrNoHandOver, "a submission not folded yet")
		claimed, err := l.Claim(ctx, p)
		require.NoError(t, err)
		require.Equal(t, []string{"acme/early"}, refsOf(claimed))
	})
}

// TestADeposedLeadersHandOverIsRefused: a hand-over by a leader whose
// lease another took (frozen past it, say) stores its submissions, as
// ingest must, but its claim is refused in the same transaction: it hands
// out nothing, leads no more, and the successor claims the jobs, as first
// attempts.
func TestADeposedLeadersHandOverIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, l := handOverWorld(t)
	expireLease(t, db)
	c2 := leading(t, db, "c2")
	p := claimParams("e", "i", 5)
	stored, got, err := l.HandOver(ctx, []journal.Item{{Group: "acme", ID: "h1", Task: "t"}, {Group: "globex", ID: "h2", Task: "t"}}, p)
	require.NoError(t, err)
	require.True(t, stored, "the submissions are stored all the same")
	require.Empty(t, got, "nothing handed out by the deposed leader")
	_, err = l.Claim(ctx, p)
	require.ErrorIs(t, err, journal.ErrNotLeading, "it leads no more")

	_, err = c2.Has(ctx, fairway.JobRef{Group: "globex", ID: "h2"}) // folded
	require.NoError(t, err)
	claimed, err := c2.Claim(ctx, p)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"acme/h1", "globex/h2"}, refsOf(claimed))
	for _, j := range claimed {
		require.EqualValues(t, 1, j.Attempt, "%s: the refused claim made no attempt", j.Ref.ID)
	}
}

func refsOf(jobs []journal.ClaimedJob) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Ref.Group + "/" + j.Ref.ID
	}
	return out
}

// stateSummary is what a state says of its jobs and its fair selection,
// without the rows' ids and times (which differ between two databases).
func stateSummary(s *journal.State) string {
	out := fmt.Sprintf("cursor %s %d\n", s.Cursor.Group, s.Cursor.Counter)
	for _, g := range []string{"acme", "globex", "hooli"} {
		for _, id := range []string{"u0", "u1", "u2", "u3", "holder", "n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"} {
			if j := s.Jobs.Get(fairway.JobRef{Group: g, ID: id}); j != nil {
				executor := ""
				if j.Holder != nil {
					executor = j.Holder.Executor + "/" + j.Holder.Instance
				}
				out += fmt.Sprintf("%s/%s %s %d %s\n", g, id, j.State(), j.Attempt, executor)
			}
		}
	}
	return out
}
