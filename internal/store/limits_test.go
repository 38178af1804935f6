package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// taskJob returns a normalized submission of task in group.
func taskJob(group, task string) fairway.Submission {
	s := fairway.Submission{Group: group, Task: task}
	if err := s.Normalize("", "", fairway.DefaultMaxArgsSize, 0); err != nil {
		panic(err)
	}
	return s
}

func claimTasks(t *testing.T, s *store.Store, n int, tasks []string, own map[string]int) []fairway.Job {
	t.Helper()
	jobs, err := s.Claim(t.Context(), store.ClaimParams{Executor: "w", Limit: n, Tasks: tasks, Lease: time.Minute,
		Scheme: fairway.CountingScheme{High: 4, Low: 1}, TaskLimits: own})
	require.NoError(t, err)
	require.LessOrEqual(t, len(jobs), n)
	return jobs
}

func countBy(jobs []fairway.Job, key func(fairway.Job) string) map[string]int {
	out := map[string]int{}
	for _, j := range jobs {
		out[key(j)]++
	}
	return out
}

func byTask(j fairway.Job) string  { return j.Task }
func byGroup(j fairway.Job) string { return j.Group }

// TestTaskLimitSkipsOnlyTheCappedJobs: the oldest jobs of the only group
// are of a task at its limit; the claim takes the others instead of
// leaving its slots idle, in one call.
func TestTaskLimitSkipsOnlyTheCappedJobs(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	var subs []fairway.Submission
	for range 20 {
		subs = append(subs, taskJob("g", "export"))
	}
	for range 5 {
		subs = append(subs, taskJob("g", "mail"))
	}
	insert(t, s, subs...)
	require.NoError(t, s.SetLimit(ctx, store.LimitTask, "export", 2))

	jobs := claimTasks(t, s, 6, []string{"export", "mail"}, nil)
	require.Equal(t, map[string]int{"export": 2, "mail": 4}, countBy(jobs, byTask), "2 exports (the limit), then mail: no slot left idle")
	jobs = claimTasks(t, s, 6, []string{"export", "mail"}, nil)
	require.Equal(t, map[string]int{"mail": 1}, countBy(jobs, byTask))
	require.Empty(t, claimTasks(t, s, 6, []string{"export"}, nil), "export is at its limit")

	// An export ends: one more may run.
	held := claimedExport(t, s)
	_, err := s.Complete(ctx, []store.Outcome{{Attempt: store.Attempt{Group: "g", JobID: held.ID, Attempt: held.Attempt, Executor: "w"}, Kind: fairway.OutcomeSuccess}}, 0)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"export": 1}, countBy(claimTasks(t, s, 6, []string{"export", "mail"}, nil), byTask))

	limits, err := s.Limits(ctx)
	require.NoError(t, err)
	require.Len(t, limits, 1)
	require.Equal(t, fairway.Limit{Kind: "task", Name: "export", Max: 2, Held: 2, Updated: limits[0].Updated}, limits[0])

	// Raised, then removed.
	require.NoError(t, s.SetLimit(ctx, store.LimitTask, "export", 5))
	require.Len(t, claimTasks(t, s, 10, []string{"export"}, nil), 3)
	require.NoError(t, s.DeleteLimit(ctx, store.LimitTask, "export"))
	require.Len(t, claimTasks(t, s, 100, []string{"export"}, nil), 14)
	require.ErrorIs(t, s.DeleteLimit(ctx, store.LimitTask, "export"), fairway.ErrNotFound)
}

func claimedExport(t *testing.T, s *store.Store) fairway.Job {
	t.Helper()
	jobs, err := s.List(t.Context(), store.ListParams{Group: "g", Task: "export", State: fairway.StateScheduled})
	require.NoError(t, err)
	require.NotEmpty(t, jobs)
	return jobs[0]
}

// TestGroupLimits: no group holds more than its limit ("*" for those
// without one of their own); the claim goes on to the other groups.
func TestGroupLimits(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	var subs []fairway.Submission
	for _, g := range []string{"a", "b", "big"} {
		for range 10 {
			subs = append(subs, taskJob(g, "t"))
		}
	}
	insert(t, s, subs...)
	require.NoError(t, s.SetLimit(ctx, store.LimitGroup, store.AnyGroup, 2))
	require.NoError(t, s.SetLimit(ctx, store.LimitGroup, "big", 5))

	jobs := claimTasks(t, s, 20, allTasks, nil)
	require.Equal(t, map[string]int{"a": 2, "b": 2, "big": 5}, countBy(jobs, byGroup))
	require.Empty(t, claimTasks(t, s, 20, allTasks, nil))

	// Group "a" stopped altogether; the others go on.
	require.NoError(t, s.SetLimit(ctx, store.LimitGroup, "a", 0))
	require.NoError(t, s.DeleteLimit(ctx, store.LimitGroup, store.AnyGroup))
	jobs = claimTasks(t, s, 20, allTasks, nil)
	require.Equal(t, map[string]int{"b": 8}, countBy(jobs, byGroup))

	require.ErrorIs(t, s.SetLimit(ctx, "queue", "x", 1), fairway.ErrInvalid)
	require.ErrorIs(t, s.SetLimit(ctx, store.LimitTask, "*", 1), fairway.ErrInvalid)
	require.ErrorIs(t, s.SetLimit(ctx, store.LimitTask, "x", -1), fairway.ErrInvalid)
}

// TestExecutorTaskLimit: an executor's own cap per task (max-concurrent)
// bounds what one claim takes of that task, below the cluster's.
func TestExecutorTaskLimit(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	var subs []fairway.Submission
	for range 5 {
		subs = append(subs, taskJob("g", "ocr"), taskJob("h", "ocr"))
	}
	subs = append(subs, taskJob("h", "mail"))
	insert(t, s, subs...)
	require.NoError(t, s.SetLimit(ctx, store.LimitTask, "ocr", 3))

	jobs := claimTasks(t, s, 5, []string{"ocr", "mail"}, map[string]int{"ocr": 1})
	require.Equal(t, map[string]int{"ocr": 1, "mail": 1}, countBy(jobs, byTask))
	jobs = claimTasks(t, s, 5, []string{"ocr"}, map[string]int{"ocr": 4})
	require.Len(t, jobs, 2, "the cluster's limit (3) is the lower one now")
}

// TestLimitsHoldAcrossCoordinators: several coordinators (stores with pools
// of their own) claim and complete at once; the limits are never
// exceeded, and every job runs.
func TestLimitsHoldAcrossCoordinators(t *testing.T) {
	t.Parallel()
	first, url := storetest.OpenURL(t)
	ctx := t.Context()
	stores := []*store.Store{first}
	for range 2 {
		s, err := store.Open(ctx, url, store.Options{})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		stores = append(stores, s)
	}
	const perGroup = 40
	var subs []fairway.Submission
	for i := range perGroup {
		for _, g := range []string{"a", "b", "c"} {
			task := "slow"
			if i%2 == 0 {
				task = "fast"
			}
			subs = append(subs, taskJob(g, task))
		}
	}
	insert(t, first, subs...)
	require.NoError(t, first.SetLimit(ctx, store.LimitTask, "slow", 3))
	require.NoError(t, first.SetLimit(ctx, store.LimitGroup, store.AnyGroup, 4))

	var mu sync.Mutex
	peak := map[string]int{}
	done := 0
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for w := range 12 {
		s := stores[w%len(stores)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker := fmt.Sprintf("w%d", w)
			// Each worker ends its jobs only after its next claim: jobs are
			// held across claims, as by executors that run them a while.
			var holding []store.Outcome
			end := func() bool {
				if len(holding) == 0 {
					return true
				}
				if _, err := s.Complete(ctx, holding, 0); err != nil {
					errs <- err
					return false
				}
				holding = nil
				return true
			}
			defer end()
			for {
				mu.Lock()
				finished := done == len(subs)
				mu.Unlock()
				if finished {
					return
				}
				jobs, err := s.Claim(ctx, store.ClaimParams{Executor: worker, Limit: 2, Tasks: []string{"slow", "fast"}, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}})
				if err != nil {
					errs <- err
					return
				}
				// One snapshot of what every executor holds right now.
				now := s.HeldNow(t)
				mu.Lock()
				for k, n := range now {
					peak[k] = max(peak[k], n)
				}
				done += len(jobs)
				mu.Unlock()
				if !end() {
					return
				}
				for _, j := range jobs {
					holding = append(holding, store.Outcome{Attempt: store.Attempt{Group: j.Group, JobID: j.ID, Attempt: j.Attempt, Executor: worker}, Kind: fairway.OutcomeSuccess})
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, len(subs), done)
	require.LessOrEqual(t, peak["task:slow"], 3, "peaks: %v", peak)
	for _, g := range []string{"a", "b", "c"} {
		require.LessOrEqual(t, peak["group:"+g], 4, "peaks: %v", peak)
	}
	require.Positive(t, peak["task:slow"], "peaks: %v", peak)
}
