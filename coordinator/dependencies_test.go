package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/stretchr/testify/require"
)

// TestWorkflowRunsInDependencyOrder submits, in one request, a fan-out
// and fan-in (fetch → parse-a, parse-b → merge) beside a chain whose head
// fails (bad → after-bad → last): the first runs in dependency order, the
// second is cancelled link by link, each event naming the link at fault.
func TestWorkflowRunsInDependencyOrder(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(*testing.T) *harness{"rows": setup, "journal": setupJournal} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			workflowRunsInDependencyOrder(t, setup(t), name == "rows")
		})
	}
}

// workflowRunsInDependencyOrder is TestWorkflowRunsInDependencyOrder on
// h's engine (graph: with the verb graph, which the journal does not
// offer yet).
func workflowRunsInDependencyOrder(t *testing.T, h *harness, graph bool) {
	var mu sync.Mutex
	var ran []string
	h.executor("ex1", 4, map[string]executor.Handler{"step": func(_ context.Context, job *executor.Job) error {
		var args struct {
			Name string `json:"name"`
			Fail bool   `json:"fail"`
		}
		if err := json.Unmarshal(job.Args, &args); err != nil {
			return err
		}
		mu.Lock()
		ran = append(ran, args.Name)
		mu.Unlock()
		if args.Fail {
			return fairway.Permanent(errors.New("boom"))
		}
		return nil
	}})
	step := func(ref string, fail bool, deps ...string) fairway.WorkflowJob {
		args, _ := json.Marshal(map[string]any{"name": ref, "fail": fail})
		return fairway.WorkflowJob{Ref: ref, Submission: fairway.Submission{Task: "step", Args: args, DependsOn: deps}}
	}
	// Listed in no useful order: the workflow orders them itself.
	refs, err := h.client.SubmitWorkflow(t.Context(), "g", fairway.Workflow{Jobs: []fairway.WorkflowJob{
		step("merge", false, "parse-a", "parse-b"),
		step("parse-a", false, "fetch"),
		step("fetch", false),
		step("parse-b", false, "fetch"),
		step("last", false, "after-bad"),
		step("after-bad", false, "bad"),
		step("bad", true),
	}})
	require.NoError(t, err)
	require.Len(t, refs, 7)

	finals := map[string]events.Event{}
	h.until(func(ev events.Event) bool {
		if ev.State.Final() {
			finals[ev.JobID] = ev
		}
		return len(finals) == 7
	})
	state := func(ref string) fairway.State { return finals[refs[ref]].State }
	for _, ref := range []string{"fetch", "parse-a", "parse-b", "merge"} {
		require.Equal(t, fairway.StateSuccess, state(ref), ref)
	}
	require.Equal(t, fairway.StateFailed, state("bad"))
	require.Equal(t, fairway.StateCancelled, state("after-bad"))
	require.Equal(t, "dependency "+refs["bad"]+" failed", finals[refs["after-bad"]].Error)
	require.Equal(t, fairway.StateCancelled, state("last"))
	require.Equal(t, "dependency "+refs["after-bad"]+" was cancelled", finals[refs["last"]].Error)

	mu.Lock()
	require.ElementsMatch(t, []string{"fetch", "parse-a", "parse-b", "merge", "bad"}, ran, "cancelled jobs never run")
	at := func(name string) int { return slices.Index(ran, name) }
	require.Less(t, at("fetch"), at("parse-a"))
	require.Less(t, at("fetch"), at("parse-b"))
	require.Less(t, at("parse-a"), at("merge"))
	require.Less(t, at("parse-b"), at("merge"))
	mu.Unlock()

	if !graph {
		return
	}
	jobs, err := h.client.Graph(t.Context(), "g", refs["parse-a"])
	require.NoError(t, err)
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	require.ElementsMatch(t, []string{refs["fetch"], refs["parse-a"], refs["merge"]}, ids, "parse-a's ancestors and descendants, not its sibling")
}

// TestDependencyRefusals: cycles, unknown ids and holds of two kinds are
// refused, naming the field; a refused workflow stores nothing.
func TestDependencyRefusals(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.executor("ex1", 1, map[string]executor.Handler{"echo": echo})
	wf := func(jobs ...fairway.WorkflowJob) error {
		_, err := h.client.SubmitWorkflow(t.Context(), "g", fairway.Workflow{Jobs: jobs})
		return err
	}
	j := func(ref string, deps ...string) fairway.WorkflowJob {
		return fairway.WorkflowJob{Ref: ref, Submission: fairway.Submission{ID: "id-" + ref, Task: "echo", DependsOn: deps}}
	}
	err := wf(j("a", "c"), j("b", "a"), j("c", "b"))
	requireInvalid(t, err, "jobs[0].depends_on", "cycle (→: depends on): a → c → b → a")
	err = wf(j("a"), j("b", "a", "nowhere"))
	requireInvalid(t, err, "jobs[1].depends_on[1]", "job nowhere does not exist in group g")
	err = wf(j("a", "a"))
	requireInvalid(t, err, "jobs[0].depends_on[0]", "cannot depend on itself")
	for _, id := range []string{"id-a", "id-b", "id-c"} {
		_, err := h.client.Get(t.Context(), "g", id)
		require.ErrorIs(t, err, fairway.ErrNotFound, "%s stored by a refused workflow", id)
	}

	_, err = h.client.SubmitWait(t.Context(), fairway.Submission{Group: "g", Task: "echo", DependsOn: []string{"nowhere"}})
	requireInvalid(t, err, "depends_on[0]", "job nowhere does not exist in group g")
	_, err = h.client.SubmitWait(t.Context(), fairway.Submission{Group: "g", Task: "echo", DependsOn: []string{"x"}, Pending: true})
	requireInvalid(t, err, "depends_on", "not both")

	// A dependency that succeeded already: the answer shows the job
	// released, and it runs.
	done, err := h.client.SubmitWait(t.Context(), fairway.Submission{Group: "g", Task: "echo"})
	require.NoError(t, err)
	h.final(done.ID)
	after, err := h.client.SubmitWait(t.Context(), fairway.Submission{Group: "g", Task: "echo", DependsOn: []string{done.ID}})
	require.NoError(t, err)
	require.NotEqual(t, fairway.StatePending, after.State)
	evs := h.final(after.ID)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)

	// A blocked job is not released by hand.
	held, err := h.client.SubmitWait(t.Context(), fairway.Submission{Group: "g", Task: "echo", Pending: true})
	require.NoError(t, err)
	blocked, err := h.client.SubmitWait(t.Context(), fairway.Submission{Group: "g", Task: "echo", DependsOn: []string{held.ID}})
	require.NoError(t, err)
	require.Equal(t, fairway.StatePending, blocked.State)
	_, err = h.client.Release(t.Context(), "g", blocked.ID)
	require.ErrorIs(t, err, fairway.ErrConflict)
	require.ErrorContains(t, err, "waits for its dependencies ("+held.ID+")")
}

func requireInvalid(t *testing.T, err error, field, message string) {
	t.Helper()
	require.ErrorIs(t, err, fairway.ErrInvalid)
	require.Equal(t, field, fairway.AsError(err).Field, "%v", err)
	require.Contains(t, fairway.AsError(err).Message, message)
}
