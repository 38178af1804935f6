package journal_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/stretchr/testify/require"
)

// TestTheJournalKeepsWhatItNeeds: the leader's retention deletes the rows
// its snapshots cover and that are older than JournalAge, but the
// submitted rows of jobs that have not ended; a coordinator that restores
// from PostgreSQL alone then holds the leader's state and runs the jobs
// left, with their arguments; and a follower that has not read for half
// of JournalAge restores from the last snapshot rather than read on.
func TestTheJournalKeepsWhatItNeeds(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	submitJobs(t, db, 40, "acme", "globex") // one row: 10 jobs of it stay
	cfg := journal.LeaderConfig{Holder: "c1", TTL: time.Hour, Renew: time.Hour, Poll: 5 * time.Millisecond, SnapshotRows: 1,
		JournalAge: time.Millisecond, PruneEvery: time.Hour, LivePoll: time.Hour}
	l := journal.NewLeader(db, cfg)
	go l.Run(ctx)
	require.Eventually(t, func() bool { return l.View(func(*journal.State, journal.Lease) {}) }, 10*time.Second, 5*time.Millisecond)

	// end runs and ends up to n waiting jobs.
	end := func(n int) {
		claimed, err := l.Claim(ctx, claimParams("e1", "i", n))
		require.NoError(t, err)
		var ends []journal.Report
		for _, c := range claimed {
			ends = append(ends, journal.Report{Kind: journal.Ended, Item: journal.Item{Group: c.Ref.Group, ID: c.Ref.ID, Attempt: c.Attempt,
				Executor: "e1", Instance: "i", Outcome: journal.OutcomeSuccess}})
		}
		_, err = l.Report(ctx, ends)
		require.NoError(t, err)
	}
	end(30)
	var rows int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_journal`).Scan(&rows))
	require.Greater(t, rows, 2, "the submission, claims and ends")

	// Once a snapshot covers them (a fold takes one at each row here)
	// and their mark is older than JournalAge, every row but the
	// submission of the 10 left goes.
	var kinds []string
	require.Eventually(t, func() bool {
		_, err := l.PruneJournal(ctx)
		require.NoError(t, err)
		r, err := db.Query(ctx, `SELECT kind FROM fairway_journal ORDER BY id`)
		require.NoError(t, err)
		kinds = kinds[:0]
		for r.Next() {
			var k string
			require.NoError(t, r.Scan(&k))
			kinds = append(kinds, k)
		}
		return len(kinds) == 1
	}, 10*time.Second, 10*time.Millisecond, "the journal holds %v", kinds)
	require.Equal(t, []string{string(journal.Submitted)}, kinds)

	// From PostgreSQL alone: the same state, and the jobs left run with
	// their arguments.
	fresh, _, err := journal.LoadSnapshot(ctx, db, 0)
	require.NoError(t, err)
	l.View(func(s *journal.State, _ journal.Lease) { require.Equal(t, s.Jobs, fresh.Jobs) })
	require.Equal(t, 10, fresh.Jobs.Len())

	// A follower whose last read is older than half of JournalAge
	// restores from the snapshot before it reads.
	cfg.Holder, cfg.Renew = "c2", 20*time.Millisecond
	f := journal.NewLeader(db, cfg)
	go f.Run(ctx)
	require.Eventually(t, func() bool { return f.Restores() >= 2 }, 10*time.Second, 5*time.Millisecond, "the follower restores again")
	var jobs int
	require.True(t, f.Follow(func(s *journal.State) { jobs = s.Jobs.Len() }))
	require.Equal(t, 10, jobs)

	// The follower takes over: its claim reads the jobs' submissions
	// from the row kept (it never folded that row itself).
	expireLease(t, db)
	require.Eventually(t, func() bool {
		claimed, err := f.Claim(ctx, claimParams("e2", "i", 20))
		if err != nil {
			return false
		}
		require.Len(t, claimed, 10)
		for _, c := range claimed {
			require.Equal(t, "t", c.Submission.Task, "job %v's submission", c.Ref)
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
}
