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

// TestAPartitionsStatus: the lease's holder and epoch, the unfinished
// jobs by state and group, and the rows whose events wait: while the
// leader's publishing is held, the rows appended since count with the age
// of the oldest; once it publishes and records its position, none.
func TestAPartitionsStatus(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	gate := make(chan struct{})
	publish := func(ctx context.Context, _ []fairway.Event) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	early, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: time.Second, Renew: 50 * time.Millisecond, Poll: 10 * time.Millisecond,
		SnapshotEvery: time.Hour, PublishedNote: time.Millisecond, Publish: publish})
	_, err := l.Status(early)
	cancel()
	require.ErrorIs(t, err, journal.ErrNotRestored, "before it restored the partition")

	// A row before any coordinator led the partition: it waits too.
	body, err := journal.Encode([]journal.Item{{Group: "g0", ID: "early", Task: "t"}})
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	runLeader(t, l)
	require.Eventually(t, func() bool { return l.View(func(*journal.State, journal.Lease) {}) }, 10*time.Second, 5*time.Millisecond)
	follower := journal.NewLeader(db, journal.LeaderConfig{Holder: "c2", TTL: time.Second, Renew: 50 * time.Millisecond, Poll: 10 * time.Millisecond, SnapshotEvery: time.Hour})
	runLeader(t, follower)

	var items []journal.Item
	for i := range 5 {
		items = append(items, journal.Item{Group: fmt.Sprintf("g%d", i%2), ID: fmt.Sprintf("j%d", i), Task: "t"})
	}
	body, err = journal.Encode(items)
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	claimed, err := l.Claim(ctx, claimParams("e", "i", 2))
	require.NoError(t, err)
	require.NotEmpty(t, claimed)

	for _, c := range []*journal.Leader{l, follower} {
		st, err := c.Status(ctx)
		require.NoError(t, err)
		require.Equal(t, c == l, st.Leading)
		require.Equal(t, "c1", st.Holder)
		require.Positive(t, st.Epoch)
		require.Positive(t, st.Left)
		require.Equal(t, 2, st.Groups)
		require.Equal(t, map[fairway.State]int{fairway.StateWaiting: 6 - len(claimed), fairway.StateScheduled: len(claimed)}, st.Jobs)
		require.GreaterOrEqual(t, st.Unpublished, int64(3), "the first row, the batch and the claim wait for their events")
		require.Positive(t, st.Lag)
	}

	close(gate)
	require.Eventually(t, func() bool {
		st, err := l.Status(ctx)
		require.NoError(t, err)
		return st.Unpublished == 0 && st.Lag == 0
	}, 10*time.Second, 10*time.Millisecond, "published and recorded: nothing waits")

	// A row that makes no event (a weight) moves the position too: the
	// lag of a quiet partition does not grow.
	require.NoError(t, l.SetWeight(ctx, "g0", 2))
	require.Eventually(t, func() bool {
		st, err := l.Status(ctx)
		require.NoError(t, err)
		return st.Unpublished == 0
	}, 10*time.Second, 10*time.Millisecond, "the weight's row is covered by the recorded position")
}
