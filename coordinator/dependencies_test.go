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
	workflowRunsInDependencyOrder(t, setupRetrying(t))
}

// workflowRunsInDependencyOrder is TestWorkflowRunsInDependencyOrder on
// h's engine.
func workflowRunsInDependencyOrder(t *testing.T, h *harness) {
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

	jobs, err := h.client.Graph(t.Context(), "g", refs["parse-a"])
	require.NoError(t, err)
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	require.ElementsMatch(t, []string{refs["fetch"], refs["parse-a"], refs["merge"]}, ids, "parse-a's ancestors and descendants, not its sibling")
}

// TestGraphsOfUnfinishedAndEndedJobs: a job's graph holds its ancestors
// and descendants whether they ended or not, and a job submitted a moment
// ago, with one coordinator and with two answering as NATS hands the
// requests out (the unfinished jobs are the state's, the ended ones
// records). It fails without the state's jobs that name an ended one
// (State.NamedBy): a's graph would lose b, c, d and f once a ended.
func TestGraphsOfUnfinishedAndEndedJobs(t *testing.T) {
	t.Parallel()
	engines := map[string]func(*testing.T) *harness{
		"one coordinator":  setup,
		"two coordinators": func(t *testing.T) *harness { h, _, _ := twoJournalCoordinators(t); return h },
	}
	for name, setup := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			ctx := t.Context()
			job := func(ref, task string, deps ...string) fairway.WorkflowJob {
				return fairway.WorkflowJob{Ref: ref, Submission: fairway.Submission{ID: ref, Task: task, DependsOn: deps}}
			}
			// a runs; the others wait.
			_, err := h.client.SubmitWorkflow(ctx, "g", fairway.Workflow{Jobs: []fairway.WorkflowJob{
				job("a", "first"), job("b", "later", "a"), job("c", "later", "b"), job("d", "later", "a"), job("e", "later"),
			}})
			require.NoError(t, err)
			graph := func(id string) map[string]fairway.State {
				t.Helper()
				jobs, err := h.client.Graph(ctx, "g", id)
				require.NoError(t, err, "the graph of %s", id)
				out := map[string]fairway.State{}
				for _, j := range jobs {
					out[j.ID] = j.State
				}
				return out
			}
			pending := fairway.StatePending
			require.Equal(t, map[string]fairway.State{"a": fairway.StateWaiting, "b": pending, "c": pending, "d": pending}, graph("a"))

			// Jobs of "later" may not run (a limit of none), but their task
			// is known: f's submission names it.
			_, err = h.client.SetLimit(ctx, "task", "later", 0)
			require.NoError(t, err)
			h.executor("ex1", 2, map[string]executor.Handler{"first": echo, "later": echo})
			released := map[string]bool{}
			h.until(func(ev events.Event) bool {
				if ev.State == fairway.StateWaiting && (ev.JobID == "b" || ev.JobID == "d") {
					released[ev.JobID] = true
				}
				return len(released) == 2
			})
			// f names a, which ended before f was submitted.
			_, err = h.client.SubmitWait(ctx, fairway.Submission{Group: "g", ID: "f", Task: "later", DependsOn: []string{"a"}})
			require.NoError(t, err)
			// Released at once (the row engine) or by the leader's
			// resolution a moment after (the journal).
			h.until(func(ev events.Event) bool { return ev.JobID == "f" && ev.State == fairway.StateWaiting })

			waiting, success := fairway.StateWaiting, fairway.StateSuccess
			require.Equal(t, map[string]fairway.State{"a": success, "b": waiting, "c": pending, "d": waiting, "f": waiting}, graph("a"),
				"a's descendants, unfinished, once it ended")
			require.Equal(t, map[string]fairway.State{"a": success, "b": waiting, "c": pending}, graph("c"))
			require.Equal(t, map[string]fairway.State{"a": success, "f": waiting}, graph("f"))
			require.Equal(t, map[string]fairway.State{"e": waiting}, graph("e"))
			_, err = h.client.Graph(ctx, "g", "nowhere")
			require.ErrorIs(t, err, fairway.ErrNotFound)
			_, err = h.client.Graph(ctx, "other", "a")
			require.ErrorIs(t, err, fairway.ErrNotFound, "a job of another group")
		})
	}
}

// TestDependencyRefusals: cycles, unknown ids and holds of two kinds are
// refused, naming the field; a refused workflow stores nothing.
func TestDependencyRefusals(t *testing.T) {
	t.Parallel()
	dependencyRefusals(t, setupRetrying(t))
}

// dependencyRefusals is TestDependencyRefusals on h's engine.
func dependencyRefusals(t *testing.T, h *harness) {
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

	// Through the stream: a rejected event names the field.
	id, err := h.client.Submit(t.Context(), fairway.Submission{Group: "g", Task: "echo", DependsOn: []string{"nowhere"}})
	require.NoError(t, err)
	evs = h.until(func(ev events.Event) bool { return ev.JobID == id && ev.State == fairway.StateRejected })
	rejected := evs[len(evs)-1]
	require.Equal(t, fairway.CodeInvalid, rejected.Code)
	require.Equal(t, "depends_on[0]", rejected.Field)
	require.Contains(t, rejected.Error, "job nowhere does not exist in group g")
}

func requireInvalid(t *testing.T, err error, field, message string) {
	t.Helper()
	require.ErrorIs(t, err, fairway.ErrInvalid)
	require.Equal(t, field, fairway.AsError(err).Field, "%v", err)
	require.Contains(t, fairway.AsError(err).Message, message)
}
