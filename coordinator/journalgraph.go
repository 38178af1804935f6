package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/journal"
)

// journalGraph is a job's graph on the journal engine (docs/journal.md,
// "The API on the journal"): the walk (store.GraphNodes) reads the
// unfinished jobs' edges from the partition's state (journal.Leader.Edges:
// each one's depends_on as submitted, and which unfinished jobs name a
// job) and the ended jobs' from their records, bounded (maxGraphJobs,
// maxGraphEdges), nearest relatives first; its first step folds every row committed
// before the request, so that a job is in its graph as soon as its
// submission was acknowledged, whichever coordinator answers. The jobs are
// then read as get reads them: the unfinished ones from the state, the
// others (those that ended meanwhile too) from their records.
func (c *Coordinator) journalGraph(ctx context.Context, group string, req events.JobRequest) (events.Reply, error) {
	e := c.parts.of(group)
	leader := e.leader
	live := func(ctx context.Context, ids []string, first bool) (journal.Edges, error) {
		return leader.Edges(ctx, group, ids, first)
	}
	nodes, truncated, err := e.store.GraphNodes(ctx, group, req.ID, maxGraphJobs, maxGraphEdges, live)
	if err != nil {
		return events.Reply{}, journalError(err)
	}
	refs := make([]fairway.JobRef, len(nodes))
	for i, id := range nodes {
		refs[i] = fairway.JobRef{Group: group, ID: id}
	}
	views, err := leader.Jobs(ctx, refs)
	if err != nil {
		return events.Reply{}, journalError(err)
	}
	jobs := make([]fairway.Job, 0, len(nodes))
	var ended []string
	for _, ref := range refs {
		if v := views[ref]; v != nil {
			j := jobOfView(v)
			j.Args = nil
			jobs = append(jobs, j)
		} else {
			ended = append(ended, ref.ID)
		}
	}
	if len(ended) > 0 {
		records, err := e.store.GraphRecords(ctx, group, ended)
		if err != nil {
			return events.Reply{}, err
		}
		jobs = append(jobs, records...)
	}
	// In submission order.
	slices.SortFunc(jobs, func(a, b fairway.Job) int {
		if d := a.Submitted.Compare(b.Submitted); d != 0 {
			return d
		}
		return strings.Compare(a.ID, b.ID)
	})
	reply := events.Reply{Jobs: jobs}
	if truncated {
		reply.Warning = fmt.Sprintf(graphTruncated, maxGraphJobs, maxGraphEdges)
	}
	return reply, nil
}
