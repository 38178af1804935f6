package store_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

func timedSub(t *testing.T, edit func(*fairway.Submission)) fairway.Submission {
	t.Helper()
	s := fairway.Submission{Group: "g", Task: "t"}
	edit(&s)
	require.NoError(t, s.Normalize("", "", fairway.DefaultMaxArgsSize, 3))
	return s
}

func TestPendingJobsWaitForReleaseOrTrigger(t *testing.T) {
	s, ctx := setup(t)
	later := time.Now().Add(time.Hour)
	ids := insert(t, s,
		timedSub(t, func(s *fairway.Submission) { s.Pending = true }),
		timedSub(t, func(s *fairway.Submission) { s.TriggerAfter = &later }),
	)
	held, triggered := ids[0], ids[1]
	for _, id := range ids {
		job, err := s.Get(ctx, "g", id)
		require.NoError(t, err)
		require.Equal(t, fairway.StatePending, job.State)
	}
	require.Empty(t, claim(t, s, "w", 10), "pending jobs are not eligible")

	// The trigger time has not come: nothing is released.
	applied, err := s.TriggerPending(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, applied)
	s.Backdate(t, triggered)
	applied, err = s.TriggerPending(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, []string{triggered}, appliedIDs(applied))
	require.Equal(t, fairway.StateWaiting, applied[0].State)

	// By hand: a pending job is released; anything else is a conflict.
	job, err := s.Release(ctx, "g", held)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State)
	require.Nil(t, job.TriggerAfter)
	_, err = s.Release(ctx, "g", held)
	require.ErrorContains(t, err, "is waiting, not pending")
	_, err = s.Release(ctx, "other", triggered)
	require.ErrorIs(t, err, fairway.ErrNotFound)

	require.Len(t, claim(t, s, "w", 10), 2, "released jobs are eligible")
}

func TestExpiredJobsFailUnstarted(t *testing.T) {
	s, ctx := setup(t)
	later := time.Now().Add(time.Hour)
	ids := insert(t, s,
		timedSub(t, func(s *fairway.Submission) { s.ExpiresAt = &later }),
		timedSub(t, func(s *fairway.Submission) { s.ExpiresAt = &later; s.Pending = true }),
		timedSub(t, func(s *fairway.Submission) { s.ExpiresAt = &later }), // claimed below: started jobs do not expire
	)
	started := claim(t, s, "w", 1)
	require.Len(t, started, 1)
	applied, err := s.ExpireJobs(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, applied, "not expired yet")
	for _, id := range ids {
		s.Backdate(t, id)
	}
	applied, err = s.ExpireJobs(ctx, 100)
	require.NoError(t, err)
	require.Len(t, applied, 2)
	for _, a := range applied {
		require.NotEqual(t, started[0].ID, a.JobID)
		job, err := s.Get(ctx, "g", a.JobID)
		require.NoError(t, err)
		require.Equal(t, fairway.StateFailed, job.State)
		require.Equal(t, store.ExpiredError, job.Error)
		require.NotNil(t, job.Finished)
	}
	job, err := s.Get(ctx, "g", started[0].ID)
	require.NoError(t, err)
	require.Equal(t, fairway.StateScheduled, job.State)
}

func TestSetPriority(t *testing.T) {
	s, ctx := setup(t)
	ids := insert(t, s, timedSub(t, func(*fairway.Submission) {}), timedSub(t, func(*fairway.Submission) {}))
	job, err := s.SetPriority(ctx, "g", ids[1], fairway.PriorityHigh)
	require.NoError(t, err)
	require.Equal(t, fairway.PriorityHigh, job.Priority)
	// The counting scheme starts with high: the re-prioritised job goes first.
	jobs := claim(t, s, "w", 1)
	require.Equal(t, ids[1], jobs[0].ID)
	_, err = s.SetPriority(ctx, "g", ids[1], fairway.PriorityLow)
	require.ErrorContains(t, err, "is scheduled: only pending, waiting or stuck jobs can be re-prioritised")
	_, err = s.SetPriority(ctx, "g", ids[0], "urgent")
	require.ErrorContains(t, err, `unknown priority "urgent"`)
}

func appliedIDs(as []store.Applied) []string {
	ids := make([]string, len(as))
	for i, a := range as {
		ids[i] = a.JobID
	}
	return ids
}
