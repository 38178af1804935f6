package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
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
	applied, err := s.Complete(t.Context(), []store.Outcome{{Attempt: store.Attempt{Group: g, JobID: id, Attempt: held.Attempt, Executor: "w"}, Kind: kind, Error: "boom"}}, 0)
	require.NoError(t, err)
	require.Len(t, applied, 1)
	return applied
}

func ended(refs ...string) []fairway.JobRef {
	var out []fairway.JobRef
	for i := 0; i+1 < len(refs); i += 2 {
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

	graph, truncated, err := s.Graph(ctx, "g", "w2", 100, 0)
	require.False(t, truncated)
	require.NoError(t, err)
	require.Equal(t, []string{"w1", "w2", "w3"}, jobIDs(graph), "w2's ancestor and descendant")
	require.Equal(t, []string{"w1", "w2"}, graph[2].DependsOn)
	_, _, err = s.Graph(ctx, "other", "w2", 100, 0)
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
	for after := ""; ; {
		slice, err := s.BlockedJobs(ctx, []string{"g"}, []string{after}, 2)
		require.NoError(t, err)
		ids := slice["g"]
		var cands []fairway.JobRef
		for _, id := range ids {
			cands = append(cands, fairway.JobRef{Group: "g", ID: id})
		}
		applied, left, err := s.ResolveCandidates(ctx, cands, store.ResolveBounds{})
		require.NoError(t, err)
		require.Empty(t, left)
		all = append(all, applied...)
		if len(ids) < 2 {
			break
		}
		after = ids[len(ids)-1]
	}
	require.ElementsMatch(t, []string{"b0", "b1", "b2", "b3", "b4"}, appliedIDs(all))
	require.Equal(t, fairway.StatePending, state(t, s, "g", "both"))
}

// blockedJobs stores n jobs of group g named prefix00.., each depending on
// all of deps, in batches.
func blockedJobs(t *testing.T, s *store.Store, g, prefix string, n int, deps ...string) []fairway.JobRef {
	t.Helper()
	var refs []fairway.JobRef
	var batch []fairway.Submission
	for i := range n {
		id := fmt.Sprintf("%s%05d", prefix, i)
		batch = append(batch, job(g, id, deps...))
		refs = append(refs, fairway.JobRef{Group: g, ID: id})
		if len(batch) == 500 || i == n-1 {
			insert(t, s, batch...)
			batch = nil
		}
	}
	return refs
}

// TestResolutionStatementIsBounded: one statement checks the candidates it
// is given as far as its bounds allow, counting dependency entries (each
// is a key look-up): per group, and in all; a group's first and the
// statement's first are always taken; the blocked ones it left come back
// in order, and passing them again makes progress.
func TestResolutionStatementIsBounded(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	var deps []string
	for i := range 10 {
		deps = append(deps, fmt.Sprintf("d%d", i))
		insert(t, s, job("big", deps[i]))
	}
	insert(t, s, job("small", "d"))
	big := blockedJobs(t, s, "big", "b", 30, deps...) // 10 entries each
	small := blockedJobs(t, s, "small", "s", 3, "d")  // 1 entry each
	insert(t, s, job("small", "free"))                // not blocked: passed over
	cands := append(append(slices.Clone(big), fairway.JobRef{Group: "small", ID: "free"}), small...)

	// big: 0, 10, 20, 30 entries before b00..b03 (< 35), 40 before b04.
	// All: b00..b03 count 40, then s0 41, s1 42: s2 has 42 before it.
	applied, left, err := s.ResolveCandidates(ctx, cands, store.ResolveBounds{GroupDeps: 35, Deps: 42})
	require.NoError(t, err)
	require.Empty(t, applied, "their dependencies wait")
	require.Equal(t, append(slices.Clone(big[4:]), small[2]), left)

	// A statement whose first candidate is over the bounds takes it.
	_, left, err = s.ResolveCandidates(ctx, big, store.ResolveBounds{GroupDeps: 1, Deps: 1})
	require.NoError(t, err)
	require.Equal(t, big[1:], left)

	// Passed again until none is left, they are all resolved once their
	// dependencies have ended.
	for _, d := range deps {
		_, err := s.Cancel(ctx, "big", d)
		require.NoError(t, err)
	}
	var all []store.Applied
	for statements := 0; len(cands) > 0; statements++ {
		require.Less(t, statements, 20)
		applied, cands, err = s.ResolveCandidates(ctx, cands, store.ResolveBounds{GroupDeps: 35, Deps: 42})
		require.NoError(t, err)
		all = append(all, applied...)
	}
	require.Len(t, all, 30, "the big group's jobs, cancelled")
	require.Equal(t, fairway.StateCancelled, state(t, s, "big", "b00029"))
	require.Equal(t, fairway.StatePending, state(t, s, "small", "s00000"))
}

// TestDependentsOfAnEndedJobAreBounded: the look-up of an ended job's
// dependents reads at most the limit per group: a group with more is
// named (for a sweep), its dependents not read. ids are per group: another
// group's job of the same id is not a dependent. ResolveDependents, which
// does it all, resolves every one of them anyway.
func TestDependentsOfAnEndedJobAreBounded(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	insert(t, s, job("g", "a"), job("g", "x"), job("h", "a"))
	blockedJobs(t, s, "g", "after-a-", 5, "a")
	insert(t, s, job("g", "after-x", "x"), job("h", "after-a", "a"))

	deps, over, err := s.BlockedDependents(ctx, ended("g", "a", "h", "a"), 3)
	require.NoError(t, err)
	require.Equal(t, []string{"g"}, over)
	require.Equal(t, ended("h", "after-a"), deps)
	deps, over, err = s.BlockedDependents(ctx, ended("g", "x"), 3)
	require.NoError(t, err)
	require.Empty(t, over)
	require.Equal(t, ended("g", "after-x"), deps)

	many := blockedJobs(t, s, "g", "many-", store.DependentsLimitDefault+1, "x")
	_, err = s.Cancel(ctx, "g", "x")
	require.NoError(t, err)
	applied, err := s.ResolveDependents(ctx, ended("g", "x"), nil)
	require.NoError(t, err)
	require.Len(t, applied, len(many)+1, "every dependent of x, found by reading the group's blocked jobs")
}

// TestGraphIsBoundedWhateverItsShape: a 3,000-job workflow whose jobs each
// depend on the 1st, 2nd and 5th before (edges that skip levels, diamonds
// everywhere) has a graph of thousands of ancestors and descendants for
// its middle job: the answer is its nearest 500 relatives, truncated, in
// well under a second (the recursive walk of every path took 6 s). A hub
// with more dependents than the edges' bound is truncated too.
func TestGraphIsBoundedWhateverItsShape(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	id := func(i int) string { return fmt.Sprintf("wf-%04d", i) }
	skips := []int{1, 2, 5}
	for b := 0; b < 3000; b += fairway.MaxWorkflowJobs {
		var subs []fairway.Submission
		for i := b; i < b+fairway.MaxWorkflowJobs; i++ {
			var deps []string
			for _, k := range skips {
				if i-k >= 0 {
					deps = append(deps, id(i-k))
				}
			}
			subs = append(subs, job("g", id(i), deps...))
		}
		_, err := s.InsertWorkflow(ctx, subs)
		require.NoError(t, err)
	}
	bounded, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	graph, truncated, err := s.Graph(bounded, "g", id(1500), store.GraphJobsDefault, store.GraphEdgesDefault)
	took := time.Since(start)
	require.NoError(t, err)
	t.Logf("graph of the middle of a 3,000-job workflow with skip edges: %d jobs, truncated %v, in %v", len(graph), truncated, took)
	require.True(t, truncated)
	require.Len(t, graph, store.GraphJobsDefault)
	require.Less(t, took, time.Second)
	ids := jobIDs(graph)
	for _, k := range skips {
		require.Contains(t, ids, id(1500-k), "a dependency")
		require.Contains(t, ids, id(1500+k), "a dependent")
	}
	require.NotContains(t, ids, id(1500-skips[0]*store.GraphJobsDefault), "far ancestors are left out first")

	graph, truncated, err = s.Graph(ctx, "g", id(0), 5000, 100)
	require.NoError(t, err)
	require.True(t, truncated, "the edges' bound")
	require.LessOrEqual(t, len(graph), 101)

	graph, truncated, err = s.Graph(ctx, "g", id(2999), 5000, 100_000)
	require.NoError(t, err)
	require.False(t, truncated)
	require.Len(t, graph, 3000, "every ancestor, each once")
}

// TestDependencyStatementsUseIndexes: the resolution's and the graph's
// statements find their rows through indexes, whatever the table holds:
// here 20,000 held jobs of the same group that wait for no dependency, and
// other groups' jobs.
func TestDependencyStatementsUseIndexes(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	insert(t, s, job("g", "a"), job("g", "b"))
	for b := 0; b < 20000; b += 1000 {
		var subs []fairway.Submission
		for i := b; i < b+1000; i++ {
			held := job("g", fmt.Sprintf("held-%05d", i))
			held.Pending = true
			subs = append(subs, held, job(fmt.Sprintf("other-%d", i%50), fmt.Sprintf("o-%05d", i)))
		}
		insert(t, s, subs...)
	}
	refs := blockedJobs(t, s, "g", "blocked-", 500, "a", "b")
	var ids []string
	for _, r := range refs[:100] {
		ids = append(ids, r.ID)
	}
	plans := s.DependencyPlans(t, "g", ids, []string{"a"})
	for file, index := range map[string]string{
		"resolve_dependents.sql": "fairway_job_pkey",
		"blocked_dependents.sql": "fairway_job_dependents",
		"blocked_jobs.sql":       "fairway_job_blocked",
		"blocked_groups.sql":     "fairway_job_blocked",
		"graph_dependencies.sql": "fairway_job_pkey",
		"graph_dependents.sql":   "fairway_job_dependents",
		"job_graph.sql":          "fairway_job_pkey",
	} {
		require.Contains(t, plans[file], index, "%s:\n%s", file, plans[file])
		require.NotContains(t, plans[file], "Seq Scan on fairway_job", "%s:\n%s", file, plans[file])
	}
}
