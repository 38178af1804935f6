package store_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

// An executor silent for longer than the gone timeout is marked gone: its
// heartbeats and claims are refused until it registers again, under the
// same instance or a new one, without asking whether the gone one runs.
func TestGoneExecutorUntilItRegistersAgain(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	notAsked := func(fairway.Executor) bool { t.Error("a gone executor was asked whether it runs"); return true }
	_, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 1, Tasks: []string{"t"}}, time.Hour, notAsked)
	require.NoError(t, err)
	id := insert(t, s, sub("a", fairway.PriorityLow))[0]

	gone, err := s.MarkExecutorsGone(ctx, time.Hour)
	require.NoError(t, err)
	require.Empty(t, gone, "heard from just now")
	s.SilenceExecutor(t, "w")
	gone, err = s.MarkExecutorsGone(ctx, time.Hour)
	require.NoError(t, err)
	require.Len(t, gone, 1)
	require.Equal(t, "i1", gone[0].Instance)
	gone, err = s.MarkExecutorsGone(ctx, time.Hour)
	require.NoError(t, err)
	require.Empty(t, gone, "marked once")

	live, err := s.LiveTasks(ctx)
	require.NoError(t, err)
	require.Empty(t, live)
	known, err := s.KnownTasks(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"t"}, known, "a task once registered stays known: it is accepted, with a warning")
	job, err := s.Get(ctx, "a", id)
	require.NoError(t, err)
	require.True(t, job.NoExecutor)
	counts, err := s.JobsWithoutExecutor(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"t": 1}, counts)

	require.Error(t, s.Heartbeat(ctx, "w", "i1", nil, time.Minute), "a gone instance must register again")
	_, err = s.Claim(ctx, store.ClaimParams{Executor: "w", Instance: "i1", Limit: 1, Tasks: []string{"t"}, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.ErrorIs(t, err, fairway.ErrNotRegistered)

	_, err = s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 1, Tasks: []string{"t"}}, time.Hour, notAsked)
	require.NoError(t, err)
	require.NoError(t, s.Heartbeat(ctx, "w", "i1", nil, time.Minute))
	job, err = s.Get(ctx, "a", id)
	require.NoError(t, err)
	require.False(t, job.NoExecutor)
	jobs, err := s.Claim(ctx, store.ClaimParams{Executor: "w", Instance: "i1", Limit: 1, Tasks: []string{"t"}, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.False(t, jobs[0].NoExecutor, "held jobs wait for no executor")
	counts, err = s.JobsWithoutExecutor(ctx)
	require.NoError(t, err)
	require.Empty(t, counts)
}

// Deregistering applies to the registered instance only; a deregistered
// executor's app-id is free for a new instance at once.
func TestDeregisterExecutor(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	notAsked := func(fairway.Executor) bool { t.Error("a deregistered executor was asked whether it runs"); return true }
	_, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i1", Slots: 1, Tasks: []string{"t"}}, time.Hour, notAsked)
	require.NoError(t, err)
	require.ErrorIs(t, s.DeregisterExecutor(ctx, "w", "old"), fairway.ErrNotRegistered)
	require.NoError(t, s.DeregisterExecutor(ctx, "w", "i1"))
	require.NoError(t, s.DeregisterExecutor(ctx, "w", "i1"), "twice is no error")
	execs, err := s.Executors(ctx)
	require.NoError(t, err)
	require.Len(t, execs, 1)
	require.Equal(t, fairway.ExecutorDeregistered, execs[0].State)
	require.NotNil(t, execs[0].Left)
	_, err = s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "i2", Slots: 1, Tasks: []string{"t"}}, time.Hour, notAsked)
	require.NoError(t, err)
	execs, err = s.Executors(ctx)
	require.NoError(t, err)
	require.Equal(t, fairway.ExecutorLive, execs[0].State)
	require.Nil(t, execs[0].Left)
}

// TestQueueCounts: the jobs not yet final by group, task and state, and
// how long the oldest due waiting one has waited; a job due later and a
// pending one have waited for nothing.
func TestQueueCounts(t *testing.T) {
	s, ctx := setup(t)
	insert(t, s, sub("a", fairway.PriorityLow), sub("a", fairway.PriorityLow), sub("b", fairway.PriorityLow))
	later := time.Now().Add(time.Hour)
	future := sub("c", fairway.PriorityLow)
	future.RunAt = &later
	held := sub("d", fairway.PriorityLow)
	held.Pending = true
	insert(t, s, future, held)
	s.SetDueAgo(t, "a", 90*time.Second)

	counts, err := s.QueueCounts(ctx, 100)
	require.NoError(t, err)
	got := map[string]fairway.QueueCount{}
	for _, c := range counts {
		got[c.Group+"/"+string(c.State)] = c
	}
	require.Len(t, got, 4, "%+v", counts)
	require.Equal(t, int64(2), got["a/waiting"].Jobs)
	require.InDelta(t, 90, got["a/waiting"].OldestDueSeconds, 30, "group a's jobs were due 90 s ago")
	require.Equal(t, int64(1), got["b/waiting"].Jobs)
	require.Less(t, got["b/waiting"].OldestDueSeconds, 30.0)
	require.Zero(t, got["c/waiting"].OldestDueSeconds, "due in an hour")
	require.Equal(t, int64(1), got["d/pending"].Jobs)
	require.Zero(t, got["d/pending"].OldestDueSeconds)

	counts, err = s.QueueCounts(ctx, 1)
	require.NoError(t, err)
	require.Len(t, counts, 1)
	require.Equal(t, "a", counts[0].Group, "the largest count first")
	require.Equal(t, int64(2), counts[0].Jobs)
}
