package store_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

// claimOne claims one job at a time n times (a slot freeing at a time, as
// executors ask) and counts them per group.
func claimOne(t *testing.T, s *store.Store, fairness string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		jobs, err := s.Claim(t.Context(), store.ClaimParams{Executor: "w", Limit: 1, Tasks: []string{"t", "u"}, Lease: time.Minute,
			Scheme: fairway.CountingScheme{High: 4, Low: 1}, Fairness: fairness})
		require.NoError(t, err)
		for _, j := range jobs {
			got[j.Group]++
		}
	}
	return got
}

// TestClaimSharesTime: sharing time, a group whose jobs run 100 ms gets one
// job for every ten of a group whose jobs run 10 ms (equal slot-time);
// counting jobs, one each in turn.
func TestClaimSharesTime(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	var subs []fairway.Submission
	for range 200 {
		subs = append(subs, taskJob("a", "t"), taskJob("b", "t"))
	}
	ids := insert(t, s, subs...)
	require.NoError(t, s.LearnRunTimes(ctx, []store.Run{{Group: "a", JobID: ids[0], Ran: 100 * time.Millisecond}, {Group: "b", JobID: ids[1], Ran: 10 * time.Millisecond}}))
	got := claimOne(t, s, store.FairnessTime, 110)
	require.InDelta(t, 10, got["a"], 1, "%v", got)
	require.InDelta(t, 100, got["b"], 1, "%v", got)
	got = claimOne(t, s, store.FairnessJobs, 20)
	require.Equal(t, map[string]int{"a": 10, "b": 10}, got)
}

// TestClaimFollowsWeights: counting jobs, a group of weight 3 gets three
// jobs for each of a group of weight 1.
func TestClaimFollowsWeights(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	var subs []fairway.Submission
	for range 100 {
		subs = append(subs, taskJob("a", "t"), taskJob("b", "t"))
	}
	insert(t, s, subs...)
	require.NoError(t, s.SetWeight(ctx, "a", 3))
	got := claimOne(t, s, store.FairnessJobs, 40)
	require.InDelta(t, 30, got["a"], 1, "%v", got)
	require.InDelta(t, 10, got["b"], 1, "%v", got)
	shares, err := s.GroupShares(ctx, time.Hour, nil)
	require.NoError(t, err)
	require.Equal(t, []fairway.GroupShare{{Group: "a", Weight: 3}}, shares, "a weighted group that ran nothing yet is listed")

	// The journal engine's running jobs (its state's) count from their
	// start: b's for 30 s, one of a's from before the window (its 10 s).
	now, err := s.Now(ctx)
	require.NoError(t, err)
	shares, err = s.GroupShares(ctx, 10*time.Second, []journal.Running{
		{Group: "b", Started: now.Add(-30 * time.Second).UnixMicro()},
		{Group: "a", Started: now.Add(-5 * time.Second).UnixMicro()},
	})
	require.NoError(t, err)
	require.Len(t, shares, 2)
	require.Equal(t, "a", shares[0].Group)
	require.InDelta(t, 5, shares[0].Seconds, 1)
	require.InDelta(t, 10, shares[1].Seconds, 1, "b counts within the window only")
	require.InDelta(t, 0.75, shares[0].FairShare, 0.001, "a's weight 3 against b's 1")

	err = s.SetWeight(ctx, "a", 0)
	var fe *fairway.Error
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "weight", fe.Field)
}

// TestClaimRateLimits: a task's rate limit passes its jobs over once its
// bucket is empty, and the claim takes other work instead; the bucket
// refills with time. A limit on each group counts each group apart.
func TestClaimRateLimits(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	var subs []fairway.Submission
	for range 20 {
		subs = append(subs, taskJob("a", "t"), taskJob("b", "t"), taskJob("a", "u"))
	}
	insert(t, s, subs...)
	require.NoError(t, s.SetRateLimit(ctx, "t", "", "5/m"))
	claimTasks := func(n int) map[string]int {
		jobs, err := s.Claim(ctx, store.ClaimParams{Executor: "w", Limit: n, Tasks: []string{"t", "u"}, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
		require.NoError(t, err)
		got := map[string]int{}
		for _, j := range jobs {
			got[j.Task]++
		}
		return got
	}
	require.Equal(t, map[string]int{"t": 5, "u": 5}, claimTasks(10), "5 of t, then u fills the slots")
	require.Equal(t, map[string]int{"u": 3}, claimTasks(3), "t's bucket is empty")
	s.AgeRateBuckets(t, 24*time.Second) // 2 tokens at 5 a minute
	require.Equal(t, map[string]int{"t": 2, "u": 1}, claimTasks(3))

	require.NoError(t, s.DeleteRateLimit(ctx, "t", ""))
	require.NoError(t, s.SetRateLimit(ctx, "t", "*", "1/h"))
	jobs, err := s.Claim(ctx, store.ClaimParams{Executor: "w", Limit: 10, Tasks: []string{"t"}, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a", "b"}, groupsOf(jobs), "one t an hour in each group")
	limits, err := s.RateLimits(ctx)
	require.NoError(t, err)
	require.Len(t, limits, 1)
	require.Equal(t, "task:t,group:*", limits[0].Scope())
	require.Equal(t, "1/h", limits[0].Rate)
}
