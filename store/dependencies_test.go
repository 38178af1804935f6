package store_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/store"
	"github.com/stretchr/testify/require"
)

// job returns a normalized submission of task t in group g with an id.
func job(g, id string, deps ...string) fairway.Submission {
	s := fairway.Submission{ID: id, Group: g, Task: "t", DependsOn: deps}
	if err := s.Normalize("", "", fairway.DefaultMaxArgsSize, 0); err != nil {
		panic(err)
	}
	return s
}

func state(t *testing.T, s *store.Store, g, id string) fairway.State {
	t.Helper()
	j, err := s.Get(t.Context(), g, id)
	require.NoError(t, err)
	return j.State
}

// finish claims the job id (and whatever else is due), unless claimed
// already, and ends it with kind.
func finish(t *testing.T, s *store.Store, g, id string, kind fairway.Outcome) []store.Applied {
	t.Helper()
	var held fairway.Job
	for _, j := range claim(t, s, "w", 100) {
		if j.ID == id {
			held = j
		}
	}
	if held.ID == "" {
		// Claimed with an earlier job.
		j, err := s.Get(t.Context(), g, id)
		require.NoError(t, err)
		require.Equal(t, fairway.StateScheduled, j.State, "job %s was not claimable", id)
		held = *j
	}
	applied, err := s.Complete(t.Context(), []store.Outcome{{Attempt: store.Attempt{Group: g, JobID: id, Attempt: held.Attempt, Worker: "w"}, Kind: kind, Error: "boom"}}, 0)
	require.NoError(t, err)
	require.Len(t, applied, 1)
	return applied
}

func ended(refs ...string) []fairway.JobRef {
	var out []fairway.JobRef
	for i := 0; i < len(refs); i += 2 {
		out = append(out, fairway.JobRef{Group: refs[i], ID: refs[i+1]})
	}
	return out
}

// TestFanOutAndFanIn: b and c wait for a; d waits for both. Each is
// released exactly when its last dependency succeeded, not before.
func TestFanOutAndFanIn(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	insert(t, s, job("g", "a"))
	insert(t, s, job("g", "b", "a"), job("g", "c", "a"), job("g", "d", "b", "c"))
	for _, id := range []string{"b", "c", "d"} {
		require.Equal(t, fairway.StatePending, state(t, s, "g", id))
	}
	// Nothing changes while a runs.
	applied, err := s.ResolveDependents(ctx, nil, ended("g", "b", "g", "c", "g", "d"))
	require.NoError(t, err)
	require.Empty(t, appliedIDs(applied))

	ends := finish(t, s, "g", "a", fairway.OutcomeSuccess)
	require.False(t, ends[0].NoDependents, "a completion says when others depend on the job")
	applied, err = s.ResolveDependents(ctx, ended("g", "a"), nil)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"b", "c"}, appliedIDs(applied))
	for _, a := range applied {
		require.Equal(t, fairway.StateWaiting, a.State)
	}
	require.Equal(t, fairway.StatePending, state(t, s, "g", "d"))

	finish(t, s, "g", "b", fairway.OutcomeSuccess)
	applied, err = s.ResolveDependents(ctx, ended("g", "b"), nil)
	require.NoError(t, err)
	require.Empty(t, appliedIDs(applied), "d still waits for c")
	finish(t, s, "g", "c", fairway.OutcomeSuccess)
	applied, err = s.ResolveDependents(ctx, ended("g", "c"), nil)
	require.NoError(t, err)
	require.Equal(t, []string{"d"}, appliedIDs(applied))
	require.Equal(t, fairway.StateWaiting, state(t, s, "g", "d"))
	// Resolving again changes nothing.
	applied, err = s.ResolveDependents(ctx, ended("g", "a", "g", "b", "g", "c"), ended("g", "d"))
	require.NoError(t, err)
	require.Empty(t, appliedIDs(applied))
	require.True(t, finish(t, s, "g", "d", fairway.OutcomeSuccess)[0].NoDependents, "nothing depends on d")
}

// TestFailureCancelsDependents: a's failure cancels b, whose cancellation
// cancels c; each error names the dependency at fault, and each change
// has its event. A job of another group with the same ids is untouched.
func TestFailureCancelsDependents(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	insert(t, s, job("g", "a"), job("other", "a"))
	insert(t, s, job("g", "b", "a"), job("other", "b", "a"))
	insert(t, s, job("g", "c", "b"))
	finish(t, s, "g", "a", fairway.OutcomePermanent)

	applied, err := s.ResolveDependents(ctx, ended("g", "a"), nil)
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, appliedIDs(applied))
	require.Equal(t, fairway.StateCancelled, applied[0].State)
	applied, err = s.ResolveDependents(ctx, ended("g", "b"), nil)
	require.NoError(t, err)
	require.Equal(t, []string{"c"}, appliedIDs(applied))

	b, err := s.Get(ctx, "g", "b")
	require.NoError(t, err)
	require.Equal(t, "dependency a failed", b.Error)
	require.NotNil(t, b.Finished)
	c, err := s.Get(ctx, "g", "c")
	require.NoError(t, err)
	require.Equal(t, "dependency b was cancelled", c.Error)
	require.Equal(t, fairway.StatePending, state(t, s, "other", "b"), "another group's b does not depend on g's a")

	var errs []string
	_, err = s.PublishEvents(ctx, 1000, func(evs []store.Event) error {
		for _, e := range evs {
			if e.Group == "g" && e.State == fairway.StateCancelled {
				errs = append(errs, e.JobID+": "+e.Error)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"b: dependency a failed", "c: dependency b was cancelled"}, errs)

	// Retried by hand, b waits for a again (a is failed: b stays blocked
	// until a is retried and succeeds).
	retried, err := s.Retry(ctx, "g", "b")
	require.NoError(t, err)
	require.Equal(t, fairway.StatePending, retried.State)
	applied, err = s.ResolveDependents(ctx, nil, ended("g", "b"))
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, appliedIDs(applied), "a is failed still: b is cancelled again")
}

// TestUnknownDependenciesAreRefused: a job may depend only on jobs stored
// before it, in its group, or earlier in the same batch.
func TestUnknownDependenciesAreRefused(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	insert(t, s, job("other", "x"))
	res, err := s.InsertJobs(ctx, []fairway.Submission{
		job("g", "first"),
		job("g", "second", "first"), // earlier in the batch: fine
		job("g", "third", "later"),  // later in the batch: unknown
		job("g", "later"),
		job("g", "cross", "x"), // x is another group's
	}, nil)
	require.NoError(t, err)
	require.Nil(t, res[0].Err)
	require.Nil(t, res[1].Err)
	require.True(t, res[1].Created)
	require.Equal(t, fairway.CodeInvalid, res[2].Err.Code)
	require.Equal(t, "depends_on[0]", res[2].Err.Field)
	require.Contains(t, res[2].Err.Message, "job later does not exist in group g")
	require.False(t, res[2].Created)
	require.Nil(t, res[3].Err)
	require.Contains(t, res[4].Err.Message, "job x does not exist in group g")
	_, err = s.Get(ctx, "g", "third")
	require.ErrorIs(t, err, fairway.ErrNotFound)

	rejected := map[string]string{}
	_, err = s.PublishEvents(ctx, 1000, func(evs []store.Event) error {
		for _, e := range evs {
			if e.State == fairway.StateRejected {
				rejected[e.JobID] = e.Field
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"third": "depends_on[0]", "cross": "depends_on[0]"}, rejected)
}

// TestWorkflowIsAtomic: a workflow whose last job is refused stores none
// of its jobs; the same workflow fixed stores all.
func TestWorkflowIsAtomic(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	bad := []fairway.Submission{job("g", "w1"), job("g", "w2", "w1"), job("g", "w3", "nowhere")}
	_, err := s.InsertWorkflow(ctx, bad)
	require.ErrorIs(t, err, fairway.ErrInvalid)
	require.Equal(t, "w3", fairway.AsError(err).JobID)
	for _, id := range []string{"w1", "w2", "w3"} {
		_, err := s.Get(ctx, "g", id)
		require.ErrorIs(t, err, fairway.ErrNotFound, "%s stored from a refused workflow", id)
	}
	good := []fairway.Submission{job("g", "w1"), job("g", "w2", "w1"), job("g", "w3", "w1", "w2")}
	res, err := s.InsertWorkflow(ctx, good)
	require.NoError(t, err)
	for _, r := range res {
		require.True(t, r.Created)
	}
	require.Equal(t, fairway.StateWaiting, state(t, s, "g", "w1"))
	require.Equal(t, fairway.StatePending, state(t, s, "g", "w3"))

	graph, err := s.Graph(ctx, "g", "w2", 100)
	require.NoError(t, err)
	require.Equal(t, []string{"w1", "w2", "w3"}, jobIDs(graph), "w2's ancestor and descendant")
	require.Equal(t, []string{"w1", "w2"}, graph[2].DependsOn)
	_, err = s.Graph(ctx, "other", "w2", 100)
	require.ErrorIs(t, err, fairway.ErrNotFound)
}

func jobIDs(jobs []fairway.Job) []string {
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// TestSweepResolvesWhatWasMissed: a dependency ends and nobody resolves
// its dependents (the coordinator died in between): the sweep does, in
// batches, and keeps a dependency of a blocked job from being pruned.
func TestSweepResolvesWhatWasMissed(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	insert(t, s, job("g", "a"), job("g", "slow"))
	var blocked []fairway.Submission
	for i := range 5 {
		blocked = append(blocked, job("g", "b"+string(rune('0'+i)), "a"))
	}
	blocked = append(blocked, job("g", "both", "a", "slow"))
	insert(t, s, blocked...)
	finish(t, s, "g", "a", fairway.OutcomeSuccess)

	// Pruning finished jobs keeps a: both still waits for slow.
	s.EndedAgo(t, "a", "success", 48*time.Hour)
	pruned, err := s.Prune(ctx, fairway.StateSuccess, time.Hour, "", 0)
	require.NoError(t, err)
	require.Zero(t, pruned)

	var all []store.Applied
	var after fairway.JobRef
	for {
		applied, next, err := s.ResolveBlocked(ctx, after, 2)
		require.NoError(t, err)
		all = append(all, applied...)
		if next == (fairway.JobRef{}) {
			break
		}
		after = next
	}
	require.ElementsMatch(t, []string{"b0", "b1", "b2", "b3", "b4"}, appliedIDs(all))
	require.Equal(t, fairway.StatePending, state(t, s, "g", "both"))
}
