package events

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TimeoutDefault bounds a client call whose context has no deadline.
const TimeoutDefault = 10 * time.Second

// Client submits jobs, manages them and follows their events over NATS. It
// needs no database credentials: coordinators answer its requests.
type Client struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects Subjects
	maxArgs  int64
}

// ClientOptions configures a Client.
type ClientOptions struct {
	// Prefix is the subject prefix. Defaults to "fairway".
	Prefix string
	// MaxArgsSize is checked before publishing, so an oversized job fails
	// here with a clear error. Defaults to 1 MiB.
	MaxArgsSize int64
}

// NewClient returns a client on an open NATS connection.
func NewClient(nc *nats.Conn, opts ClientOptions) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	maxArgs := opts.MaxArgsSize
	if maxArgs == 0 {
		maxArgs = fairway.DefaultMaxArgsSize
	}
	return &Client{nc: nc, js: js, subjects: NewSubjects(opts.Prefix), maxArgs: maxArgs}, nil
}

// Subjects returns the subjects the client uses.
func (c *Client) Subjects() Subjects { return c.subjects }

// prepare validates a submission locally and gives it an id, without filling
// the defaults that the coordinator owns (priority, retries).
func (c *Client) prepare(sub fairway.Submission) (fairway.Submission, []byte, error) {
	check := sub
	if err := check.Normalize(sub.Group, sub.Task, c.maxArgs, 0); err != nil {
		return sub, nil, err
	}
	sub.ID = check.ID
	data, err := json.Marshal(sub)
	return sub, data, err
}

// Submit publishes one job to JetStream and returns its id once JetStream
// has stored it: from then on the job survives a coordinator that is down.
// Validation that needs the database (tracker conflicts) happens at ingest
// and is reported as a rejected event; use SubmitWait to learn it at once.
func (c *Client) Submit(ctx context.Context, sub fairway.Submission) (string, error) {
	sub, data, err := c.prepare(sub)
	if err != nil {
		return "", err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	// No Nats-Msg-Id: JetStream's de-duplication spans every group (see
	// SubmitDuplicateWindow). The id in the body de-duplicates a publish
	// sent again, in PostgreSQL, within the group.
	msg := &nats.Msg{Subject: c.subjects.Submit(sub.Group, sub.Task), Data: data}
	InjectTrace(ctx, msg) // the job's trace starts under the caller's span
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return "", publishError(err)
	}
	return sub.ID, nil
}

// MaxSubmitBatch is the most submissions one message of the submit
// stream may carry (a JSON array of them); the coordinators refuse those
// beyond, each with its rejected event.
const MaxSubmitBatch = 1000

// submitBatchBytes caps the body of one message of SubmitMany: well under
// NATS's default max_payload (1 MiB), so a batch goes whatever the server.
const submitBatchBytes = 512 << 10

// submitManyBatch is how many submissions SubmitMany puts in one message:
// enough that a message's cost is a fraction of a job's, and few enough
// that the coordinators' fair ingest, which takes whole messages
// round-robin across groups, interleaves a tenant's burst finely with the
// others' submissions.
const submitManyBatch = 100

// SubmitMany publishes many jobs and returns their ids, in order, once
// JetStream has stored all of them. Submissions of one group and task go
// together, as JSON arrays of up to 100 (and 512 KiB): one
// JetStream message for many jobs, which costs JetStream and the
// coordinators a fraction of a message each. The coordinators store and
// refuse each submission of a message on its own, and keep the order of
// each group and task's submissions. A submission larger than a batch
// goes on its own. On error some jobs may have been stored; submitting
// the same ids again is safe.
func (c *Client) SubmitMany(ctx context.Context, subs []fairway.Submission) ([]string, error) {
	ids := make([]string, len(subs))
	type key struct{ group, task string }
	type batch struct {
		msg *nats.Msg
		n   int // submissions in it
	}
	open := map[key]*batch{}
	var msgs []*nats.Msg
	for i, sub := range subs {
		sub, data, err := c.prepare(sub)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		ids[i] = sub.ID
		k := key{sub.Group, sub.Task}
		b := open[k]
		if b != nil && (b.n == submitManyBatch || len(b.msg.Data)+len(data)+2 > submitBatchBytes) {
			b = nil
		}
		if b == nil {
			b = &batch{msg: &nats.Msg{Subject: c.subjects.Submit(sub.Group, sub.Task), Data: append(make([]byte, 0, min(submitBatchBytes, 64<<10)), '[')}}
			InjectTrace(ctx, b.msg)
			open[k] = b
			msgs = append(msgs, b.msg)
		} else {
			b.msg.Data = append(b.msg.Data, ',')
		}
		b.msg.Data = append(b.msg.Data, data...)
		b.n++
	}
	for _, msg := range msgs {
		msg.Data = append(msg.Data, ']')
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	const window = 256 // bounded number of publishes in flight, under nats.go's default cap of 4000
	futures := make([]jetstream.PubAckFuture, 0, window)
	wait := func() error {
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return publishError(err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futures = futures[:0]
		return nil
	}
	for _, msg := range msgs {
		f, err := c.js.PublishMsgAsync(msg)
		if err != nil {
			return nil, publishError(err)
		}
		futures = append(futures, f)
		if len(futures) == window {
			if err := wait(); err != nil {
				return nil, err
			}
		}
	}
	if err := wait(); err != nil {
		return nil, err
	}
	return ids, nil
}

// SubmitWait submits through the request/reply API: the reply carries the
// stored job, or the validation or tracker error at once.
func (c *Client) SubmitWait(ctx context.Context, sub fairway.Submission) (*fairway.Job, error) {
	reply, err := c.SubmitReply(ctx, sub)
	if err != nil {
		return nil, err
	}
	return reply.Job, nil
}

// SubmitReply is SubmitWait returning the whole reply: the job, and a
// Warning when it was accepted but no live executor runs its task.
func (c *Client) SubmitReply(ctx context.Context, sub fairway.Submission) (*Reply, error) {
	sub, _, err := c.prepare(sub)
	if err != nil {
		return nil, err
	}
	return c.request(ctx, c.subjects.API(sub.Group, VerbSubmit), sub)
}

// Wait waits until the job id of group ends and returns it, final: with
// its result when it succeeded, its error when it failed or was
// cancelled (a job that failed is returned, not an error). A submission
// that was rejected returns its rejection (a *fairway.Error with its code
// and field). It asks a coordinator to hold the request until the job
// ends (the wait verb, MaxWaitMS at a time), and again until ctx ends,
// when it returns the job as it was last seen with ctx's error. It may be
// called at once after Submit: a job not stored yet is waited for, and
// one that ended before the call is returned at once; a job never
// submitted is not found (after a wait of MaxWaitMS).
func (c *Client) Wait(ctx context.Context, group, id string) (*fairway.Job, error) {
	if err := fairway.CheckName("group", group); err != nil {
		return nil, err
	}
	var last *fairway.Job
	for {
		wait := time.Duration(MaxWaitMS) * time.Millisecond
		if deadline, ok := ctx.Deadline(); ok {
			// The coordinator answers before ctx ends: with the job as it
			// is then, or not found.
			left := time.Until(deadline)
			wait = min(wait, left-min(left/5, time.Second))
		}
		if wait < time.Millisecond || ctx.Err() != nil {
			return last, cmp.Or(ctx.Err(), context.DeadlineExceeded)
		}
		rctx, cancel := context.WithTimeout(ctx, wait+TimeoutDefault)
		reply, err := c.request(rctx, c.subjects.API(group, VerbWait), WaitRequest{ID: id, WaitMS: int(wait / time.Millisecond)})
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return last, ctx.Err()
		case err != nil:
			return last, err
		case reply.Job != nil && reply.Job.State.Final():
			return reply.Job, nil
		}
		if reply.Job != nil {
			last = reply.Job
		}
	}
}

// WaitMany waits until the jobs ids of group end (see Wait), at most
// waitManyAtOnce at a time, and returns them in the order of ids, once
// every wait has returned. When some failed (a rejection, ctx's end), it
// returns the error of the first of them in the order of ids, with the
// jobs of the others.
func (c *Client) WaitMany(ctx context.Context, group string, ids []string) ([]*fairway.Job, error) {
	jobs := make([]*fairway.Job, len(ids))
	errs := make([]error, len(ids))
	sem := make(chan struct{}, waitManyAtOnce)
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			jobs[i], errs[i] = c.Wait(ctx, group, id)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return jobs, fmt.Errorf("job %s: %w", ids[i], err)
		}
	}
	return jobs, nil
}

// waitManyAtOnce bounds the wait requests WaitMany has in flight (a
// coordinator holds at most 1,000 of a group's).
const waitManyAtOnce = 64

// Cancel cancels the job id of group: a job that has not started ends
// cancelled at once; a running job's handler sees its context cancelled and
// the job ends cancelled when the handler returns. Job ids are unique per
// group only, so every call about one job names its group.
func (c *Client) Cancel(ctx context.Context, group, id string) (*fairway.Job, error) {
	return c.jobVerb(ctx, group, VerbCancel, JobRequest{ID: id})
}

// Release releases a pending job: it becomes waiting, due now.
func (c *Client) Release(ctx context.Context, group, id string) (*fairway.Job, error) {
	return c.jobVerb(ctx, group, VerbRelease, JobRequest{ID: id})
}

// SetPriority re-prioritises a job that is pending, waiting or stuck.
func (c *Client) SetPriority(ctx context.Context, group, id string, prio fairway.Priority) (*fairway.Job, error) {
	return c.jobVerb(ctx, group, VerbPriority, JobRequest{ID: id, Priority: prio})
}

// jobVerb sends a request about one job to its group's API and returns
// the job of the reply.
func (c *Client) jobVerb(ctx context.Context, group, verb string, req JobRequest) (*fairway.Job, error) {
	if err := fairway.CheckName("group", group); err != nil {
		return nil, err
	}
	reply, err := c.request(ctx, c.subjects.API(group, verb), req)
	if err != nil {
		return nil, err
	}
	return reply.Job, nil
}

// SubmitWorkflow stores a workflow's jobs in group, atomically (all or
// none), and returns each job's ref with the id it was stored under. See
// fairway.Workflow.
func (c *Client) SubmitWorkflow(ctx context.Context, group string, w fairway.Workflow) (map[string]string, error) {
	if err := fairway.CheckName("group", group); err != nil {
		return nil, err
	}
	reply, err := c.request(ctx, c.subjects.API(group, VerbWorkflow), w)
	if err != nil {
		return nil, err
	}
	return reply.Refs, nil
}

// Graph returns the job id of group with the jobs it depends on and the
// jobs that depend on it, directly or not, oldest first, without args or
// result (at most 500 jobs: see GraphTruncated).
func (c *Client) Graph(ctx context.Context, group, id string) ([]fairway.Job, error) {
	jobs, _, err := c.GraphTruncated(ctx, group, id)
	return jobs, err
}

// GraphTruncated is Graph, and says why the graph was cut short ("" when
// it is whole): a graph beyond 500 jobs or 10,000 edges is answered with
// the job's nearest relatives.
func (c *Client) GraphTruncated(ctx context.Context, group, id string) (jobs []fairway.Job, truncated string, err error) {
	if err := fairway.CheckName("group", group); err != nil {
		return nil, "", err
	}
	reply, err := c.request(ctx, c.subjects.API(group, VerbGraph), JobRequest{ID: id})
	if err != nil {
		return nil, "", err
	}
	return reply.Jobs, reply.Warning, nil
}

// Limits returns the cluster's concurrency limits with the jobs each
// task or group holds now (operators).
func (c *Client) Limits(ctx context.Context) ([]fairway.Limit, error) {
	reply, err := c.request(ctx, c.subjects.Admin(VerbLimits), struct{}{})
	if err != nil {
		return nil, err
	}
	return reply.Limits, nil
}

// SetLimit sets a concurrency limit (operators): at most max jobs of task
// name (kind "task") or of group name (kind "group"; "*" for every group
// without one of its own) held by executors at once, across the cluster.
func (c *Client) SetLimit(ctx context.Context, kind, name string, max int) ([]fairway.Limit, error) {
	reply, err := c.request(ctx, c.subjects.Admin(VerbLimitSet), LimitRequest{Kind: kind, Name: name, Max: &max})
	if err != nil {
		return nil, err
	}
	return reply.Limits, nil
}

// DeleteLimit removes a concurrency limit (operators).
func (c *Client) DeleteLimit(ctx context.Context, kind, name string) ([]fairway.Limit, error) {
	reply, err := c.request(ctx, c.subjects.Admin(VerbLimitDelete), LimitRequest{Kind: kind, Name: name})
	if err != nil {
		return nil, err
	}
	return reply.Limits, nil
}

// Retry runs a failed or cancelled job again: it becomes waiting, due now,
// with its retries counted afresh.
func (c *Client) Retry(ctx context.Context, group, id string) (*fairway.Job, error) {
	return c.jobVerb(ctx, group, VerbRetry, JobRequest{ID: id})
}

// Stats returns the figures the dashboard charts (see fairway.Stats):
// of group through its tenant API, or through the operator API of
// req.Group ("" for every group) when group is "".
func (c *Client) Stats(ctx context.Context, group string, req StatsRequest) (*fairway.Stats, error) {
	reply, err := c.request(ctx, c.jobSubject(group, VerbStats), req)
	if err != nil {
		return nil, err
	}
	return reply.Stats, nil
}

// Bulk applies an action to the jobs a filter matches (see BulkRequest):
// of group through its tenant API, or through the operator API when group
// is "" (then req.Filter.Group narrows it).
func (c *Client) Bulk(ctx context.Context, group string, req BulkRequest) (*BulkResult, error) {
	reply, err := c.request(ctx, c.jobSubject(group, VerbBulk), req)
	if err != nil {
		return nil, err
	}
	return reply.Bulk, nil
}

// Drain tells an executor to take no more jobs, finish its running ones,
// deregister and exit (operators only).
func (c *Client) Drain(ctx context.Context, appID string) error {
	_, err := c.request(ctx, c.subjects.Admin(VerbDrain), DrainRequest{Executor: appID})
	return err
}

// Pause tells an executor to stop taking jobs (of cmd.Task, or of every
// task), or with cmd.Resume to take them again (operators only). Its
// running jobs finish.
func (c *Client) Pause(ctx context.Context, cmd PauseCommand) error {
	_, err := c.request(ctx, c.subjects.Admin(VerbPause), cmd)
	return err
}

// Get returns the job id of group.
func (c *Client) Get(ctx context.Context, group, id string) (*fairway.Job, error) {
	return c.jobVerb(ctx, group, VerbGet, JobRequest{ID: id})
}

// Logs returns the lines the task of the job id of group logged, oldest
// first: every page of them (see LogsPage).
func (c *Client) Logs(ctx context.Context, group, id string) ([]fairway.LogLine, error) {
	var all []fairway.LogLine
	req := LogsRequest{ID: id}
	for {
		lines, next, err := c.LogsPage(ctx, group, req)
		if err != nil {
			return nil, err
		}
		all = append(all, lines...)
		if next == "" {
			return all, nil
		}
		req.Cursor = next
	}
}

// LogsPage returns one page of the log of the job req.ID of group, oldest
// first: at most req.Limit lines (default 1000), fewer when the reply's
// size cap is reached, and the cursor of the next page ("" at the end).
// Messages longer than 64 KiB are cut, with a marker.
func (c *Client) LogsPage(ctx context.Context, group string, req LogsRequest) ([]fairway.LogLine, string, error) {
	if err := fairway.CheckName("group", group); err != nil {
		return nil, "", err
	}
	reply, err := c.request(ctx, c.subjects.API(group, VerbLogs), req)
	if err != nil {
		return nil, "", err
	}
	return reply.Logs, reply.NextCursor, nil
}

// List returns jobs, newest first: req.Limit of them (default 100), or all
// there are if fewer, following the pages a reply's size cap makes (see
// ListPage). Args and result are left out unless req.Full. With req.Group
// set it asks the tenant API of that group, else the operator API.
func (c *Client) List(ctx context.Context, req ListRequest) ([]fairway.Job, error) {
	want := req.Limit
	if want <= 0 {
		want = 100
	}
	var all []fairway.Job
	for {
		req.Limit = want - len(all)
		jobs, next, err := c.ListPage(ctx, req)
		if err != nil {
			return nil, err
		}
		all = append(all, jobs...)
		if next == "" || len(all) >= want {
			return all, nil
		}
		req.Cursor = next
	}
}

// ListPage returns one page of jobs, newest first: at most req.Limit
// (default 100, at most 1000), fewer when the reply's size cap is reached,
// and the cursor of the next page ("" when no more jobs match). Pass it
// as req.Cursor to go on.
func (c *Client) ListPage(ctx context.Context, req ListRequest) ([]fairway.Job, string, error) {
	reply, err := c.request(ctx, c.jobSubject(req.Group, VerbList), req)
	if err != nil {
		return nil, "", err
	}
	return reply.Jobs, reply.NextCursor, nil
}

// Prune removes one batch of finished jobs (operators only) and returns
// how many it removed; ask again while that equals the batch's limit.
func (c *Client) Prune(ctx context.Context, req PruneRequest) (int, error) {
	reply, err := c.request(ctx, c.subjects.Admin(VerbPrune), req)
	if err != nil {
		return 0, err
	}
	return reply.Pruned, nil
}

// Executors lists the executors the coordinators know of.
func (c *Client) Executors(ctx context.Context) ([]fairway.Executor, error) {
	reply, err := c.request(ctx, c.subjects.Admin(VerbExecutors), struct{}{})
	if err != nil {
		return nil, err
	}
	return reply.Executors, nil
}

func (c *Client) jobSubject(group, verb string) string {
	if group == "" {
		return c.subjects.Admin(verb)
	}
	return c.subjects.API(group, verb)
}

func (c *Client) request(ctx context.Context, subject string, body any) (*Reply, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	req := &nats.Msg{Subject: subject, Data: data}
	InjectTrace(ctx, req) // a submit's job, and any request, joins the caller's trace
	SetDeadline(ctx, req)
	SetLane(ctx, req)
	msg, err := c.nc.RequestMsgWithContext(ctx, req)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) {
			return nil, &fairway.Error{Code: fairway.CodeUnavailable,
				Message: fmt.Sprintf("no coordinator answered on %s (%v): is Fairway running (fairway dev), and is --nats-url right? "+
					"A tenant's credential reaches only its own group (%s), and the operator API needs an operator's", subject, err, c.subjects.API("<group>", "…"))}
		}
		return nil, fmt.Errorf("requesting %s: %w", subject, err)
	}
	var reply Reply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return nil, fmt.Errorf("decoding the reply on %s: %w", subject, err)
	}
	if reply.Error != nil {
		return nil, reply.Error
	}
	return &reply, nil
}

func publishError(err error) error {
	if errors.Is(err, nats.ErrMaxPayload) {
		return fairway.Invalid("args", "submission too large for the NATS server: %v", err)
	}
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return &fairway.Error{Code: fairway.CodeUnavailable,
			Message: fmt.Sprintf("no JetStream stream stored the submission (%v): is a coordinator running? It creates the streams at start. "+
				"A tenant's credential can submit to its own group only", err)}
	}
	return fmt.Errorf("publishing a submission: %w", err)
}

func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, TimeoutDefault)
}

// SavePeriodic creates or replaces a periodic task (operator API). Its
// nextrun is computed by the coordinator from its timer.
func (c *Client) SavePeriodic(ctx context.Context, p fairway.PeriodicTask) (*fairway.PeriodicTask, error) {
	return c.periodic(ctx, VerbPeriodicSave, p)
}

// ListPeriodic lists the periodic tasks.
func (c *Client) ListPeriodic(ctx context.Context) ([]fairway.PeriodicTask, error) {
	reply, err := c.request(ctx, c.subjects.Admin(VerbPeriodicList), struct{}{})
	if err != nil {
		return nil, err
	}
	return reply.Periodic, nil
}

// SetPeriodic enables (with the next time of its timer) or disables a
// periodic task.
func (c *Client) SetPeriodic(ctx context.Context, id string, enabled bool) (*fairway.PeriodicTask, error) {
	verb := VerbPeriodicDisable
	if enabled {
		verb = VerbPeriodicEnable
	}
	return c.periodic(ctx, verb, JobRequest{ID: id})
}

// RunPeriodicNow makes a periodic task fire at once (and enables it).
func (c *Client) RunPeriodicNow(ctx context.Context, id string) (*fairway.PeriodicTask, error) {
	return c.periodic(ctx, VerbPeriodicRunNow, JobRequest{ID: id})
}

// DeletePeriodic deletes a periodic task; its jobs stay.
func (c *Client) DeletePeriodic(ctx context.Context, id string) error {
	_, err := c.periodic(ctx, VerbPeriodicDelete, JobRequest{ID: id})
	return err
}

func (c *Client) periodic(ctx context.Context, verb string, body any) (*fairway.PeriodicTask, error) {
	reply, err := c.request(ctx, c.subjects.Admin(verb), body)
	if err != nil {
		return nil, err
	}
	if len(reply.Periodic) == 0 {
		return nil, nil
	}
	return &reply.Periodic[0], nil
}
