package store_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

// duringHeldChange runs run on a goroutine of its own while a change is
// held open (commit commits it: store.HoldRowChange, HoldRegistration),
// waits until run waits for that change's lock, commits the change, and
// returns what run returned, so that the assertions stay on the test's
// goroutine.
func duringHeldChange[T any](t *testing.T, s *store.Store, commit func(), run func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := run()
		done <- result{v, err}
	}()
	s.AwaitLockWaiter(t)
	commit()
	r := <-done
	return r.v, r.err
}

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
	a := store.Attempt{Group: "a", JobID: id, Attempt: j.Attempt, Executor: "w"}
	require.NoError(t, s.MarkRunning(ctx, []store.Start{{Attempt: a}}))

	applied, err := duringHeldChange(t, s, s.HoldRowChange(t, "a", id, "cancel_requested = true"), func() ([]store.Applied, error) {
		return s.Complete(ctx, []store.Outcome{{Attempt: a, Kind: fairway.OutcomeError, Error: "boom"}}, time.Hour)
	})
	require.NoError(t, err)
	require.Len(t, applied, 1)
	require.Equal(t, fairway.StateCancelled, applied[0].State, "the cancel request made during the statement counts")
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
	a := store.Attempt{Group: "a", JobID: id, Attempt: j.Attempt, Executor: "w"}

	// Only the state changes (the attempt, worker and instance stay), so
	// that the start's test of the state alone must catch it.
	_, err := duringHeldChange(t, s, s.HoldRowChange(t, "a", id, "state = 'waiting'"), func() (struct{}, error) {
		return struct{}{}, s.MarkRunning(ctx, []store.Start{{Attempt: a}})
	})
	require.NoError(t, err)
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

	jobs, err := duringHeldChange(t, s, s.HoldRowChange(t, "a", id, "state = 'cancelled', finished = now()"), func() ([]fairway.Job, error) {
		return s.Claim(ctx, store.ClaimParams{Executor: "w", Limit: 1, Tasks: allTasks, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
	})
	require.NoError(t, err)
	require.Empty(t, jobs, "the job was cancelled while the claim ran")
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

	handed, err := duringHeldChange(t, s, s.HoldRegistration(t, "w", "new"), func() ([]fairway.Job, error) {
		_, handed, err := s.InsertJobsFor(ctx, subs, nil, &store.Assignment{Executor: "w", Instance: "old", ClaimID: "req", Lease: time.Minute, Jobs: []int{0}})
		return handed, err
	})
	require.NoError(t, err)
	require.Empty(t, handed, "the instance it was handed to was replaced meanwhile")
	got, err := s.Get(ctx, "a", subs[0].ID)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, got.State)
	require.Zero(t, got.Attempt)
}
