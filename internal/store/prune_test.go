package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

// TestPrune: a batch removes only final jobs of the state asked for that
// ended before the cutoff, oldest first, in the group asked for, with
// their logs; waiting jobs and younger final jobs stay.
func TestPrune(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	var old, young, failed, other []string
	for i := range 5 {
		sb := sub("a", fairway.PriorityLow)
		sb.ID = fmt.Sprintf("old-%d", i)
		old = append(old, insert(t, s, sb)...)
		s.EndedAgo(t, sb.ID, "success", time.Duration(48+i)*time.Hour)
	}
	for i := range 2 {
		sb := sub("a", fairway.PriorityLow)
		sb.ID = fmt.Sprintf("young-%d", i)
		young = append(young, insert(t, s, sb)...)
		s.EndedAgo(t, sb.ID, "success", time.Hour)
	}
	sb := sub("a", fairway.PriorityLow)
	sb.ID = "failed-old"
	failed = insert(t, s, sb)
	s.EndedAgo(t, sb.ID, "failed", 48*time.Hour)
	sb = sub("b", fairway.PriorityLow)
	sb.ID = "other-group-old"
	other = insert(t, s, sb)
	s.EndedAgo(t, sb.ID, "success", 48*time.Hour)
	waiting := insert(t, s, sub("a", fairway.PriorityLow))
	s.AddLog(t, "a", old[4], "a line of an old job")
	require.Equal(t, 1, s.LogCount(t, "a", old[4]))

	// One batch of 3 takes the 3 oldest of group a.
	n, err := s.Prune(ctx, fairway.StateSuccess, 24*time.Hour, "a", 3)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	gone := func(id string, group string) bool {
		_, err := s.Get(ctx, group, id)
		return err != nil
	}
	for _, id := range []string{"old-4", "old-3", "old-2"} {
		require.True(t, gone(id, "a"), "%s is pruned (oldest first)", id)
	}
	for _, id := range []string{"old-1", "old-0"} {
		require.False(t, gone(id, "a"), "%s is left for the next batch", id)
	}
	require.Zero(t, s.LogCount(t, "a", old[4]), "a pruned job's logs go with it")
	require.Equal(t, 2+2+1+1, s.OrderRows(t, "a"), "a pruned job's place in the listings goes with it")

	// The next batch takes the rest of group a's old successes, and only them.
	n, err = s.Prune(ctx, fairway.StateSuccess, 24*time.Hour, "a", 3)
	require.NoError(t, err)
	require.Equal(t, 2, n, "fewer than the limit: nothing is left")
	for _, id := range young {
		require.False(t, gone(id, "a"), "%s ended an hour ago: kept", id)
	}
	require.False(t, gone(failed[0], "a"), "failed jobs have their own age")
	require.False(t, gone(other[0], "b"), "another group is not pruned")
	require.False(t, gone(waiting[0], "a"), "a waiting job is never pruned")

	// Every group; then the failed state.
	n, err = s.Prune(ctx, fairway.StateSuccess, 24*time.Hour, "", 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = s.Prune(ctx, fairway.StateFailed, 24*time.Hour, "", 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	// A pruned job's id can be used again.
	sb = sub("a", fairway.PriorityLow)
	sb.ID = "old-4"
	insert(t, s, sb)

	_, err = s.Prune(ctx, fairway.StateWaiting, time.Hour, "", 0)
	require.ErrorContains(t, err, `"waiting" is not a final state`)
}

// TestPruneUsesItsIndex: the prune statement reads the index of final
// jobs, not the whole table.
func TestPruneUsesItsIndex(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	require.Contains(t, s.PrunePlan(t), "fairway_job_finished")
}
