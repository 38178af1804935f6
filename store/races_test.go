package store_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/store"
	"github.com/stretchr/testify/require"
)

// TestCompleteSeesAChangeMadeDuringIt: complete.sql takes no row lock
// before its update, so a row can change between the statement's snapshot
// and its update. An error outcome whose job gets a cancel request
// meanwhile is worked out again from the new row: the job ends cancelled,
// not stuck for a retry.
func TestCompleteSeesAChangeMadeDuringIt(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	id := insert(t, s, sub("a", fairway.PriorityLow))[0]
	j := claim(t, s, "w", 1)[0]
	a := store.Attempt{Group: "a", JobID: id, Attempt: j.Attempt, Worker: "w"}
	require.NoError(t, s.MarkRunning(ctx, []store.Attempt{a}))

	commit := s.HoldRowChange(t, "a", id, "cancel_requested = true")
	type result struct {
		applied []store.Applied
		err     error
	}
	done := make(chan result, 1)
	go func() {
		applied, err := s.Complete(ctx, []store.Outcome{{Attempt: a, Kind: fairway.OutcomeError, Error: "boom"}}, time.Hour)
		done <- result{applied, err}
	}()
	s.AwaitLockWaiter(t)
	commit()
	r := <-done
	require.NoError(t, r.err)
	require.Len(t, r.applied, 1)
	require.Equal(t, fairway.StateCancelled, r.applied[0].State, "the cancel request made during the statement counts")
	got, err := s.Get(ctx, "a", id)
	require.NoError(t, err)
	require.Equal(t, fairway.StateCancelled, got.State)
	require.Zero(t, got.Retries, "a cancelled job used no retry")
}

// TestMarkRunningSkipsAJobThatChangedDuringIt: a start report whose job is
// released while the report is applied leaves the job waiting.
func TestMarkRunningSkipsAJobThatChangedDuringIt(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	id := insert(t, s, sub("a", fairway.PriorityLow))[0]
	j := claim(t, s, "w", 1)[0]
	a := store.Attempt{Group: "a", JobID: id, Attempt: j.Attempt, Worker: "w"}

	// Only the state changes (the attempt, worker and instance stay), so
	// that the start's test of the state alone must catch it.
	commit := s.HoldRowChange(t, "a", id, "state = 'waiting'")
	done := make(chan error, 1)
	go func() { done <- s.MarkRunning(ctx, []store.Attempt{a}) }()
	s.AwaitLockWaiter(t)
	commit()
	require.NoError(t, <-done)
	got, err := s.Get(ctx, "a", id)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, got.State, "a start of an attempt that ended meanwhile changes nothing")
}

// TestClaimSkipsAJobThatChangedDuringIt: a claim reads its candidates
// without row locks; one cancelled before the claim marks it is left out,
// and stays cancelled.
func TestClaimSkipsAJobThatChangedDuringIt(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	id := insert(t, s, sub("a", fairway.PriorityLow))[0]

	commit := s.HoldRowChange(t, "a", id, "state = 'cancelled', finished = now()")
	type result struct {
		jobs []fairway.Job
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// The assertions stay on the test's goroutine.
		jobs, err := s.Claim(ctx, store.ClaimParams{Worker: "w", Limit: 1, Tasks: allTasks, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
		done <- result{jobs, err}
	}()
	s.AwaitLockWaiter(t)
	commit()
	r := <-done
	require.NoError(t, r.err)
	require.Empty(t, r.jobs, "the job was cancelled while the claim ran")
	got, err := s.Get(ctx, "a", id)
	require.NoError(t, err)
	require.Equal(t, fairway.StateCancelled, got.State)
}

// TestHandOverWaitsForARegistration: a submission handed to an idle
// executor whose app-id registers a new instance while the insert runs
// (the insert read the old instance as live, then waited for the fairness
// row the registration holds) is stored waiting, not scheduled for the
// instance that is gone, where it would wait for its lease to run out.
func TestHandOverWaitsForARegistration(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	_, err := s.RegisterExecutor(ctx, fairway.Executor{AppID: "w", Instance: "old", Slots: 1, Tasks: allTasks}, time.Hour,
		func(fairway.Executor) bool { return false })
	require.NoError(t, err)
	subs := []fairway.Submission{sub("a", fairway.PriorityLow)}

	commit := s.HoldRegistration(t, "w", "new")
	type result struct {
		handed []fairway.Job
		err    error
	}
	done := make(chan result, 1)
	go func() {
		_, handed, err := s.InsertJobsFor(ctx, subs, nil, &store.Assignment{Worker: "w", Instance: "old", ClaimID: "req", Lease: time.Minute, Jobs: []int{0}})
		done <- result{handed, err}
	}()
	s.AwaitLockWaiter(t)
	commit()
	r := <-done
	require.NoError(t, r.err)
	require.Empty(t, r.handed, "the instance it was handed to was replaced meanwhile")
	got, err := s.Get(ctx, "a", subs[0].ID)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, got.State)
	require.Zero(t, got.Attempt)
}
