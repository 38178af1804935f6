package coordinator

// The verbs an operator's dashboard needs beyond the CLI's: statistics,
// retry, bulk actions and draining an executor.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/flight"
	"github.com/fairwayhq/fairway/internal/store"
)

// Bounds of the verbs below.
const (
	// bulkTimeout bounds a bulk request: its jobs are changed one at a
	// time, each as its own verb would.
	bulkTimeout = 2 * time.Minute
	// bulkErrorsMax caps the errors a bulk answer names.
	bulkErrorsMax = 20
)

func (c *Coordinator) apiRetry(ctx context.Context, group string, req events.JobRequest) (events.Reply, error) {
	job, err := c.journalRetry(ctx, group, req.ID)
	return events.Reply{Job: job}, err
}

// apiStats answers stats. Window and bucket are checked against their
// bounds (events.StatsRequest.Durations: at most 31 days, at most 1,440
// buckets, whole seconds), whoever asks, and a given window, bucket and
// group is computed at most once at a time: the requests that ask for it
// meanwhile, on any lane, get the same answer (statsFlight).
func (c *Coordinator) apiStats(ctx context.Context, r request) (events.Reply, error) {
	var req events.StatsRequest
	if err := decode(r.data, &req); err != nil {
		return events.Reply{}, err
	}
	p := store.StatsParams{Group: req.Group}
	switch {
	case !r.admin && req.Group != "" && req.Group != r.group:
		return events.Reply{}, fairway.Invalid("group", "body names group %q but the subject names %q", req.Group, r.group)
	case !r.admin:
		p.Group = r.group
	case p.Group != "":
		if err := fairway.CheckName("group", p.Group); err != nil {
			return events.Reply{}, err
		}
	}
	var err error
	if p.Window, p.Bucket, err = req.Durations(); err != nil {
		return events.Reply{}, err
	}
	// The computation runs under the context of the request that started
	// it (all are bounded by apiTimeout alike).
	// A group's from its partition's database; every group's from the
	// one database of the partitions.
	parts, db := c.parts, c.parts.first().store
	switch stores := c.parts.stores(); {
	case p.Group != "":
		parts = partitions{c.parts.of(p.Group)}
		db = parts[0].store
	case len(stores) > 1:
		return events.Reply{}, fairway.Invalid("group", "missing: the partitions are in %d databases, and the stats of every group over several databases are not built yet; ask for one group's", len(stores))
	}
	st, _, err := statsFlight.Do(ctx, statsKey{db, p}, func() (*fairway.Stats, error) {
		return db.Stats(ctx, p, func(ctx context.Context, since, now time.Time, bucket time.Duration) (*store.StatsLive, error) {
			return parts.statsLive(ctx, p.Group, since, now, bucket)
		})
	})
	return events.Reply{Stats: st}, err
}

// statsFlight computes each stats request at most once at a time per
// database: a dashboard's many browsers, or a flood of one read-only
// user, cost one computation (a stats request over a long window reads
// every job that ended in it, seconds with millions of jobs).
var statsFlight flight.Group[statsKey, *fairway.Stats]

type statsKey struct {
	store  *store.Store
	params store.StatsParams
}

// bulkActions are the per-job verbs a bulk request may apply.
var bulkActions = map[string]func(c *Coordinator, ctx context.Context, group, id string) error{
	events.BulkCancel: func(c *Coordinator, ctx context.Context, group, id string) error {
		_, err := c.journalCancel(ctx, group, id)
		return err
	},
	events.BulkRetry: func(c *Coordinator, ctx context.Context, group, id string) error {
		_, err := c.apiRetry(ctx, group, events.JobRequest{ID: id})
		return err
	},
	events.BulkRelease: func(c *Coordinator, ctx context.Context, group, id string) error {
		_, err := c.apiRelease(ctx, group, events.JobRequest{ID: id})
		return err
	},
}

// apiBulk applies an action to every job a filter matches, up to a limit:
// what a dashboard's "select all that match" does, without the page in
// between. Each job is changed as its own verb would (a running job's
// executor is told to cancel it), so one that changed meanwhile is an
// error of that job only.
func (c *Coordinator) apiBulk(ctx context.Context, r request) (events.Reply, error) {
	var req events.BulkRequest
	if err := decode(r.data, &req); err != nil {
		return events.Reply{}, err
	}
	act, ok := bulkActions[req.Action]
	if !ok {
		return events.Reply{}, fairway.Invalid("action", "unknown action %q: use cancel, retry or release", req.Action)
	}
	if req.Limit < 0 || req.Limit > events.BulkLimitMax {
		return events.Reply{}, fairway.Invalid("limit", "%d is not in 0..%d (0: %d)", req.Limit, events.BulkLimitMax, events.BulkLimitDefault)
	}
	limit := req.Limit
	if limit == 0 {
		limit = events.BulkLimitDefault
	}
	req.Filter.Cursor, req.Filter.Full = "", false
	params, err := listParams(r, req.Filter)
	if err != nil {
		return events.Reply{}, err
	}
	params.Limit = limit
	var refs []fairway.JobRef
	// On the leader (leaderVerbs), which changes the jobs one by one.
	next, err := c.journalList(ctx, params, func(j fairway.Job) bool {
		refs = append(refs, fairway.JobRef{Group: j.Group, ID: j.ID})
		return true
	})
	if err != nil {
		return events.Reply{}, err
	}
	res := &events.BulkResult{Matched: len(refs), More: next != ""}
	if req.Preview {
		return events.Reply{Bulk: res}, nil
	}
	// The API's own timeout is for one request's query, not thousands.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bulkTimeout)
	defer cancel()
	for _, ref := range refs {
		if err := act(c, ctx, ref.Group, ref.ID); err != nil {
			if len(res.Errors) < bulkErrorsMax {
				// Internal errors reach the caller as a request id only.
				e := *c.replyError(c.subjects.Admin(events.VerbBulk), err)
				e.JobID = cmp.Or(e.JobID, ref.ID)
				res.Errors = append(res.Errors, &e)
			}
			if ctx.Err() != nil {
				break
			}
			continue
		}
		res.Changed++
	}
	c.log.Info("bulk action", "action", req.Action, "group", params.Group, "matched", res.Matched, "changed", res.Changed)
	return events.Reply{Bulk: res}, nil
}

// apiDrain tells an executor to drain: take no more jobs, finish those it
// runs, deregister and exit.
func (c *Coordinator) apiDrain(ctx context.Context, r request) (events.Reply, error) {
	var req events.DrainRequest
	if err := decode(r.data, &req); err != nil {
		return events.Reply{}, err
	}
	return c.tellExecutor(ctx, req.Executor, c.subjects.Drain(req.Executor), req, "drain")
}

// apiPause tells an executor to pause or resume (all its tasks, or one).
func (c *Coordinator) apiPause(ctx context.Context, r request) (events.Reply, error) {
	var req events.PauseCommand
	if err := decode(r.data, &req); err != nil {
		return events.Reply{}, err
	}
	if req.Task != "" {
		if err := fairway.CheckName("task", req.Task); err != nil {
			return events.Reply{}, err
		}
	}
	what := "pause"
	if req.Resume {
		what = "resume"
	}
	return c.tellExecutor(ctx, req.Executor, c.subjects.Pause(req.Executor), req, what)
}

// tellExecutor sends a command to a live executor that the coordinators
// know, on its own subject; the reply names the executor.
func (c *Coordinator) tellExecutor(ctx context.Context, appID, subject string, cmd any, what string) (events.Reply, error) {
	if err := fairway.CheckName("executor", appID); err != nil {
		return events.Reply{}, err
	}
	executors, err := c.store.Executors(ctx)
	if err != nil {
		return events.Reply{}, err
	}
	for _, e := range executors {
		if e.AppID != appID {
			continue
		}
		if e.State != "" && e.State != fairway.ExecutorLive {
			return events.Reply{}, fairway.Conflict("", "executor %q is %s: nothing to %s", appID, e.State, what)
		}
		data, _ := json.Marshal(cmd)
		if err := c.nc.Publish(subject, data); err != nil {
			return events.Reply{}, fmt.Errorf("telling executor %q to %s: %w", appID, what, err)
		}
		c.log.Info("executor told to "+what, "executor", appID)
		return events.Reply{Executors: []fairway.Executor{e}}, nil
	}
	return events.Reply{}, &fairway.Error{Code: fairway.CodeNotFound, Message: fmt.Sprintf("no executor %q: see the executors verb", appID)}
}
