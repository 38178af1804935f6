package coordinator

// Dependencies: jobs that wait for other jobs (REGARDS' reliant tasks).
// A job submitted with depends_on is stored pending; when a job ends, the
// jobs that name it are resolved: released (waiting) once all they depend
// on succeeded, or cancelled when one failed or was cancelled. Released
// jobs take their turn in their group's fair order like any other; a
// cancelled job's own dependents are resolved in turn. The resolution is
// the dependents service's (maint_dependents.go); here is the API.

import (
	"context"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
)

// Bounds of a graph answer: the jobs it holds, and the edges its walk
// reads (store.Graph). A graph with more is answered truncated: the
// nearest relatives, and a warning saying so.
const (
	maxGraphJobs  = store.GraphJobsDefault
	maxGraphEdges = store.GraphEdgesDefault
)

// graphTruncated is the warning of a truncated graph answer.
const graphTruncated = "graph truncated: it has more than %d jobs or %d edges; these are the job's nearest relatives"

func (c *Coordinator) apiGraph(ctx context.Context, group string, req events.JobRequest) (events.Reply, error) {
	return c.journalGraph(ctx, group, req)
}

// apiWorkflow stores a workflow: all its jobs, or none.
func (c *Coordinator) apiWorkflow(ctx context.Context, r request) (events.Reply, error) {
	w, err := fairway.DecodeWorkflow(r.data, c.cfg.MaxArgsSize)
	if err != nil {
		return events.Reply{}, err
	}
	subs, err := w.Normalize(r.group, c.cfg.MaxArgsSize, *c.cfg.Retries)
	if err != nil {
		return events.Reply{}, err
	}
	// A refusal names the job: jobs[i].field.
	refuse := func(sub fairway.Submission, err error) error {
		e := *fairway.AsError(err)
		e.JobID = sub.ID
		return w.NameJob(&e)
	}
	now := time.Now()
	for _, sub := range subs {
		if err := c.tasks.check(ctx, sub.Task, now); err != nil {
			return events.Reply{}, refuse(sub, err)
		}
	}
	perGroup, groupBytes := map[string]int{}, map[string]int{}
	for _, sub := range subs {
		perGroup[sub.Group]++
		groupBytes[sub.Group] += len(sub.Args)
	}
	for group, n := range perGroup {
		if err := c.quotas.waitSubmits(ctx, group, n, groupBytes[group]); err != nil {
			return events.Reply{}, err
		}
	}
	refused, err := c.quotas.admit(ctx, subs)
	if err != nil {
		return events.Reply{}, err
	}
	for i, e := range refused {
		if e != nil {
			return events.Reply{}, refuse(subs[i], e)
		}
	}
	for i := range subs {
		traceSubmission(ctx, &subs[i])
	}
	refs := make(map[string]string, len(w.Jobs))
	for _, j := range w.Jobs {
		refs[j.Ref] = j.ID
	}
	// One submitted row: all the jobs, or none (one that depends on a
	// job never submitted refuses the workflow). The leader resolves the
	// dependencies.
	if err := c.parts.of(r.group).insertWorkflow(ctx, subs); err != nil { // its jobs are r.group's (Workflow.Normalize)
		return events.Reply{}, w.NameJob(err)
	}
	return events.Reply{Refs: refs}, nil
}
