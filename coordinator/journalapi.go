package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/nats-io/nats.go"
)

// The API on the journal engine (docs/journal.md, "The API on the
// journal"). Every coordinator answers reads: it folds the journal's rows
// committed before the request (journal.Leader.Jobs), so that a job is
// seen as soon as its submission or change was acknowledged, whichever
// coordinator acknowledged it, and an ended job is read from its record.
// Only the partition's leader appends the rows of changes, so a follower
// forwards the verbs that change jobs to it (forwardToLeader).

// leaderVerbs are the API verbs that change unfinished jobs, or what the
// leader's claims read (limits, rates, weights: journallimits.go): with
// the journal engine, the partition's leader answers them.
var leaderVerbs = map[string]bool{
	events.VerbCancel:      true,
	events.VerbRelease:     true,
	events.VerbPriority:    true,
	events.VerbRetry:       true,
	events.VerbLimitSet:    true,
	events.VerbLimitDelete: true,
	events.VerbRateSet:     true,
	events.VerbRateDelete:  true,
	events.VerbWeightSet:   true,
	events.VerbBulk:        true,
}

// routes says whether this coordinator leads the cluster (clusterLead)
// and one of its partitions: it answers the dispatch requests and the
// reports, and the API requests that change jobs (leaderVerbs), which
// the other coordinators forward to it.
func (c *Coordinator) routes() bool {
	return c.clead.leads.Load() && slices.ContainsFunc(c.parts, func(e *journalEngine) bool { return e.leads.Load() })
}

// errLeadsNow: the coordinator that was to forward a request leads the
// partition now, and answers it itself.
var errLeadsNow = errors.New("this coordinator leads the journal's partition now")

// forwardToLeader forwards a request to the partition's leader and returns
// its reply. While no coordinator leads (a takeover: at most a lease), it
// asks again until ctx ends; when this coordinator comes to lead
// meanwhile, errLeadsNow.
func (c *Coordinator) forwardToLeader(ctx context.Context, msg *nats.Msg) ([]byte, error) {
	subject := c.subjects.ToLeader(msg.Subject)
	wait := 20 * time.Millisecond
	for {
		if c.routes() {
			return nil, errLeadsNow
		}
		reply, err := c.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Header: msg.Header, Data: msg.Data})
		switch {
		case err == nil:
			c.metrics.forwarded.Inc()
			return reply.Data, nil
		case !errors.Is(err, nats.ErrNoResponders):
			return nil, fmt.Errorf("forwarding %s to the journal's leader: %v: %w", msg.Subject, err, fairway.ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("forwarding %s: no coordinator leads the journal's partition: %w", msg.Subject, fairway.ErrUnavailable)
		case <-time.After(wait):
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// journalError is err of a journal verb as the API says it.
func journalError(err error) error {
	switch {
	case errors.Is(err, journal.ErrNotRestored), errors.Is(err, journal.ErrNotLeading), errors.Is(err, journal.ErrFenced), errors.Is(err, journal.ErrUnreachable):
		return &fairway.Error{Code: fairway.CodeUnavailable, Message: err.Error()}
	}
	return err
}

// get is a job as of every row committed before the call: an unfinished
// one from the partition's state, an ended one from its record.
func (e *journalEngine) get(ctx context.Context, group, id string) (*fairway.Job, error) {
	ref := fairway.JobRef{Group: group, ID: id}
	views, err := e.leader.Jobs(ctx, []fairway.JobRef{ref})
	if err != nil {
		return nil, journalError(err)
	}
	v := views[ref]
	if v == nil {
		return e.store.Get(ctx, group, id) // its record, or not found
	}
	jobs := []fairway.Job{jobOfView(v)}
	if err := e.home.MarkNoExecutor(ctx, jobs); err != nil {
		return nil, err
	}
	return &jobs[0], nil
}

// jobOfView is an unfinished job as the API shows it.
func jobOfView(v *journal.JobView) fairway.Job {
	j, sub := v.Job, v.Submission
	job := fairway.Job{
		ID: v.Ref.ID, Group: v.Ref.Group, Task: j.Task, Args: json.RawMessage(sub.Args), Subject: sub.Subject, Submitter: sub.Submitter,
		Priority: fairway.Priority(j.Priority()), Tracker: sub.Tracker, State: j.State(), Retries: int(j.Retries), MaxRetries: int(j.MaxRetries),
		Attempt: int(j.Attempt), RunAt: time.UnixMicro(j.RunAt).UTC(), DependsOn: sub.Waits, Progress: int(j.Progress),
		Submitted: v.Submitted, Timeout: sub.Timeout, TraceParent: sub.TraceParent,
	}
	if len(job.Args) == 0 {
		job.Args = json.RawMessage("{}")
	}
	if job.Priority == "" {
		job.Priority = fairway.PriorityLow
	}
	if j.ExpiresAt() != 0 {
		t := time.UnixMicro(j.ExpiresAt()).UTC()
		job.ExpiresAt = &t
	}
	if j.Triggered() {
		job.TriggerAfter = &job.RunAt // it releases itself then, due at once
	}
	if h := j.Holder; h != nil {
		job.Executor = h.Executor
		if h.Started != 0 {
			t := time.UnixMicro(h.Started).UTC()
			job.Started = &t
			job.EstimatedEnd = fairway.EstimateEnd(t, job.Progress, time.Now())
		}
	}
	return job
}

// journalCancel cancels a job as the partition's leader, and tells its
// executor when one holds it.
func (c *Coordinator) journalCancel(ctx context.Context, group, id string) (*fairway.Job, error) {
	ref := fairway.JobRef{Group: group, ID: id}
	out, err := c.parts.of(group).leader.Cancel(ctx, []fairway.JobRef{ref}, "")
	if err != nil {
		return nil, journalError(err)
	}
	job, err := c.parts.of(group).get(ctx, group, id)
	if err != nil {
		return nil, err
	}
	switch out[0] {
	case journal.CancelNotFound:
		return nil, fairway.Conflict(id, "job %s is already %s", id, job.State)
	case journal.CancelRequested, journal.CancelAlreadyRequested:
		if job.State.Final() {
			break // its executor reported its end meanwhile
		}
		data, _ := json.Marshal(events.CancelCommand{Group: group, JobID: id, Attempt: job.Attempt})
		if err := c.nc.Publish(c.subjects.Cancel(job.Executor), data); err != nil {
			return nil, fmt.Errorf("telling executor %q to cancel job %s: %w", job.Executor, id, err)
		}
	}
	return job, nil
}

// journalRelease releases a pending job by hand, as the partition's
// leader: it becomes waiting, due now.
func (c *Coordinator) journalRelease(ctx context.Context, group, id string) (*fairway.Job, error) {
	ref := fairway.JobRef{Group: group, ID: id}
	out, err := c.parts.of(group).leader.ReleasePending(ctx, []fairway.JobRef{ref})
	if err != nil {
		return nil, journalError(err)
	}
	job, err := c.parts.of(group).get(ctx, group, id)
	if err != nil {
		return nil, err
	}
	switch {
	case out[0]:
		c.dispatcher.notifyWork()
	case job.State != fairway.StatePending:
		return nil, fairway.Conflict(id, "job %s is %s, not pending: only pending jobs can be released", id, job.State)
	default:
		return nil, fairway.Conflict(id, "job %s waits for its dependencies (%s): it is released when they have all succeeded, or cancel it", id, strings.Join(job.DependsOn, ", "))
	}
	return job, nil
}

// journalPriority changes the priority of a job not handed to an
// executor yet, as the partition's leader.
func (c *Coordinator) journalPriority(ctx context.Context, group, id string, prio fairway.Priority) (*fairway.Job, error) {
	if prio != fairway.PriorityHigh && prio != fairway.PriorityLow {
		return nil, fairway.Invalid("priority", "unknown priority %q: use \"high\" or \"low\"", prio)
	}
	job, err := c.parts.of(group).get(ctx, group, id)
	if err != nil {
		return nil, err
	}
	switch job.State {
	case fairway.StatePending, fairway.StateWaiting, fairway.StateStuck:
	default:
		return nil, fairway.Conflict(id, "job %s is %s: only pending, waiting or stuck jobs can be re-prioritised", id, job.State)
	}
	ref := fairway.JobRef{Group: group, ID: id}
	if _, err := c.parts.of(group).leader.SetPriority(ctx, []fairway.JobRef{ref}, prio); err != nil {
		return nil, journalError(err)
	}
	return c.parts.of(group).get(ctx, group, id)
}

// journalRetry runs a failed or cancelled job again, as the partition's
// leader.
func (c *Coordinator) journalRetry(ctx context.Context, group, id string) (*fairway.Job, error) {
	ref := fairway.JobRef{Group: group, ID: id}
	out, err := c.parts.of(group).leader.Retry(ctx, []fairway.JobRef{ref})
	if err != nil {
		return nil, journalError(err)
	}
	job, err := c.parts.of(group).get(ctx, group, id)
	if err != nil {
		return nil, err
	}
	if out[0] != journal.RetryDone {
		return nil, fairway.Conflict(id, "job %s is %s: only failed or cancelled jobs can be retried", id, job.State)
	}
	c.dispatcher.notifyWork()
	return job, nil
}

// resolutionWait bounds how long a submission's answer waits for the
// resolution of a dependency that ended before it.
const resolutionWait = 2 * time.Second

// awaitResolution waits, at most resolutionWait, until the leader has
// resolved job ref's dependencies that ended before its submission was
// folded, so that the answer shows it released (or cancelled), as the row
// engine resolves them in the request.
func (c *Coordinator) awaitResolution(ctx context.Context, ref fairway.JobRef) {
	ctx, cancel := context.WithTimeout(ctx, resolutionWait)
	defer cancel()
	leader := c.parts.of(ref.Group).leader
	if _, err := leader.Has(ctx, ref); err != nil { // a fold: the submission is in the state
		return
	}
	for {
		next := leader.Folded()
		if !leader.Resolving(ref) {
			return
		}
		leader.Wake()
		select {
		case <-next:
		case <-ctx.Done():
			return
		}
	}
}

// journalSubmit stores one submission from the request/reply API in the
// journal and answers the job as every coordinator now reads it: a
// submission of an id taken before answers the job of that id; one whose
// tracker a live job holds (the fold refuses it)
// is a duplicate naming that job.
func (c *Coordinator) journalSubmit(ctx context.Context, sub fairway.Submission) (*fairway.Job, error) {
	res, err := c.parts.of(sub.Group).insert(ctx, []fairway.Submission{sub})
	if err != nil {
		return nil, err
	}
	if res[0].Err != nil && !errors.Is(res[0].Err, fairway.ErrDuplicate) {
		return nil, res[0].Err
	}
	if res[0].Created && len(sub.DependsOn) > 0 {
		c.awaitResolution(ctx, fairway.JobRef{Group: sub.Group, ID: sub.ID})
	}
	job, err := c.parts.of(sub.Group).get(ctx, sub.Group, sub.ID)
	if errors.Is(err, fairway.ErrNotFound) && sub.Tracker != "" && res[0].Created {
		var holder string
		c.parts.of(sub.Group).leader.Follow(func(s *journal.State) { holder = s.Trackers[fairway.JobRef{Group: sub.Group, ID: sub.Tracker}] })
		if holder != "" {
			return nil, fairway.Duplicate(sub.Tracker, holder)
		}
	}
	return job, err
}
