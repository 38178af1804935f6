package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

func TestPeriodicTaskFiresOnceSkipsWhileItsJobRunsAndMarksGoStale(t *testing.T) {
	s, ctx := setup(t)
	t0 := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	_, err := s.SavePeriodic(ctx, store.PeriodicTask{ID: "poll", Enabled: true, Task: "t", Group: "g", Priority: fairway.PriorityLow,
		Timer: "*-*-* *:00/5", NextRun: t0})
	require.NoError(t, err)

	// Not due yet.
	marked, err := s.MarkDuePeriodic(ctx, "c1", t0.Add(-time.Second), time.Minute, 10)
	require.NoError(t, err)
	require.Empty(t, marked)

	// Three coordinators race for the due task: exactly one marks it.
	var mu sync.Mutex
	winners := map[string]int{}
	var wg sync.WaitGroup
	for _, c := range []string{"c1", "c2", "c3"} {
		wg.Go(func() {
			ps, err := s.MarkDuePeriodic(ctx, c, t0, time.Minute, 10)
			require.NoError(t, err)
			mu.Lock()
			winners[c] += len(ps)
			mu.Unlock()
		})
	}
	wg.Wait()
	total, winner := 0, ""
	for c, n := range winners {
		total += n
		if n > 0 {
			winner = c
		}
	}
	require.Equal(t, 1, total, "one mark for one due time: %v", winners)
	p, err := s.GetPeriodic(ctx, "poll")
	require.NoError(t, err)

	// A loser cannot fire it; the winner submits the job.
	loser := map[string]string{"c1": "c2", "c2": "c3", "c3": "c1"}[winner]
	fired, err := s.FirePeriodic(ctx, loser, *p, fairway.NewID(), 2, t0.Add(5*time.Minute))
	require.NoError(t, err)
	require.Nil(t, fired)
	jobID := fairway.NewID()
	fired, err = s.FirePeriodic(ctx, winner, *p, jobID, 2, t0.Add(5*time.Minute))
	require.NoError(t, err)
	require.False(t, fired.Skipped)
	job, err := s.Get(ctx, "g", jobID)
	require.NoError(t, err)
	require.Equal(t, "poll", job.Tracker)
	require.Equal(t, 2, job.MaxRetries)
	p, err = s.GetPeriodic(ctx, "poll")
	require.NoError(t, err)
	require.Nil(t, p.Marked)
	require.True(t, p.NextRun.Equal(t0.Add(5*time.Minute)))

	// Next due time while the job still waits: skipped, naming that job.
	marked, err = s.MarkDuePeriodic(ctx, "c1", t0.Add(5*time.Minute), time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, marked, 1)
	fired, err = s.FirePeriodic(ctx, "c1", marked[0], fairway.NewID(), 2, t0.Add(10*time.Minute))
	require.NoError(t, err)
	require.True(t, fired.Skipped)
	require.Equal(t, jobID, fired.JobID)

	// A coordinator that marks and dies: the mark goes stale after its
	// timeout and another coordinator takes the task.
	marked, err = s.MarkDuePeriodic(ctx, "dead", t0.Add(10*time.Minute), time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, marked, 1)
	marked, err = s.MarkDuePeriodic(ctx, "c2", t0.Add(10*time.Minute+30*time.Second), time.Minute, 10)
	require.NoError(t, err)
	require.Empty(t, marked, "a fresh mark holds")
	marked, err = s.MarkDuePeriodic(ctx, "c2", t0.Add(12*time.Minute), time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, marked, 1, "a stale mark is cleared")
	require.Equal(t, "c2", marked[0].MarkedBy)

	list, err := s.ListPeriodic(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NoError(t, s.DeletePeriodic(ctx, "poll"))
	require.ErrorIs(t, s.DeletePeriodic(ctx, "poll"), fairway.ErrNotFound)
}

// TestFiringAnUnmarkedPeriodicTaskChangesNothing: a coordinator whose mark
// went stale, was taken over and cleared by the one that fired the task,
// finds the task unmarked: that is "not mine", not an error.
func TestFiringAnUnmarkedPeriodicTaskChangesNothing(t *testing.T) {
	s, ctx := setup(t)
	t0 := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	_, err := s.SavePeriodic(ctx, store.PeriodicTask{ID: "poll", Enabled: true, Task: "t", Group: "g", Priority: fairway.PriorityLow,
		Timer: "*-*-* *:00/5", NextRun: t0})
	require.NoError(t, err)
	marked, err := s.MarkDuePeriodic(ctx, "c1", t0, time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, marked, 1)
	require.NoError(t, s.UnmarkPeriodic(ctx, "c1", "poll", t0.Add(5*time.Minute), true))
	fired, err := s.FirePeriodic(ctx, "c1", marked[0], fairway.NewID(), 2, t0.Add(5*time.Minute))
	require.NoError(t, err)
	require.Nil(t, fired)
}
