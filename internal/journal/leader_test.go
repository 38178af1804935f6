package journal_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
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
		ok = l.View(func(s *journal.State, le journal.Lease) { n, lease = len(s.Jobs), le })
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
			held = s.Jobs[fairway.JobRef{Group: "g", ID: "j000"}].State == fairway.StateScheduled
		})
		return ok && n == 30 && held
	}, 10*time.Second, 10*time.Millisecond, "c1 folds its claim and the new submissions")
	_, _, c2Leads := jobs(c2)
	require.False(t, c2Leads, "c2 leads while c1 holds the lease")
	require.Eventually(t, func() bool {
		n := 0
		c2.Follow(func(s *journal.State) { n = len(s.Jobs) })
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
			held = s.Jobs[fairway.JobRef{Group: "g", ID: "j001"}].State == fairway.StateScheduled
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
