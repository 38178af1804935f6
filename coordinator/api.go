package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/store"
	"github.com/nats-io/nats.go"
)

// apiTimeout bounds the work behind one API request.
const apiTimeout = 10 * time.Second

func (c *Coordinator) startAPI(ctx context.Context) error {
	if err := c.subscribe(c.subjects.APIAll(), func(msg *nats.Msg) {
		group, verb, _ := c.subjects.ParseAPI(msg.Subject)
		if err := fairway.CheckName("group", group); err != nil {
			c.respond(msg, events.Reply{}, err)
			return
		}
		c.handle(ctx, msg, group, verb, false)
	}); err != nil {
		return err
	}
	return c.subscribe(c.subjects.AdminAll(), func(msg *nats.Msg) {
		verb, _ := c.subjects.ParseAdmin(msg.Subject)
		c.handle(ctx, msg, "", verb, true)
	})
}

// handle answers one API request. group is "" on the operator API.
func (c *Coordinator) handle(ctx context.Context, msg *nats.Msg, group, verb string, admin bool) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	var reply events.Reply
	var err error
	switch verb {
	case events.VerbSubmit:
		if admin {
			err = fairway.Invalid("verb", "submit through %s instead: the group leads the subject", c.subjects.API("<group>", events.VerbSubmit))
			break
		}
		reply.Job, err = c.submit(ctx, group, msg.Data)
		if reply.Job != nil {
			reply.ID = reply.Job.ID
		}
	case events.VerbCancel, events.VerbGet, events.VerbLogs, events.VerbRelease, events.VerbPriority:
		var req events.JobRequest
		if err = decode(msg.Data, &req); err != nil {
			break
		}
		if req.ID == "" {
			err = fairway.Invalid("id", "missing: name the job")
			break
		}
		if group, err = jobGroup(group, req.Group, admin); err != nil {
			break
		}
		switch verb {
		case events.VerbCancel:
			reply.Job, err = c.cancelJob(ctx, group, req.ID)
		case events.VerbGet:
			reply.Job, err = c.store.Get(ctx, group, req.ID)
		case events.VerbRelease:
			if reply.Job, err = c.store.Release(ctx, group, req.ID); err == nil {
				c.afterChange([]store.Applied{{Group: reply.Job.Group, JobID: reply.Job.ID, State: reply.Job.State, RunAt: reply.Job.RunAt}})
			}
		case events.VerbPriority:
			reply.Job, err = c.store.SetPriority(ctx, group, req.ID, req.Priority)
		default:
			reply.Logs, err = c.store.Logs(ctx, group, req.ID)
		}
	case events.VerbList:
		var req events.ListRequest
		if err = decode(msg.Data, &req); err != nil {
			break
		}
		if !admin {
			req.Group = group
		}
		if req.State != "" && !req.State.Valid() {
			err = fairway.Invalid("state", "unknown state %q", req.State)
			break
		}
		if req.Limit < 0 || req.Limit > 1000 {
			err = fairway.Invalid("limit", "%d is not in 0..1000", req.Limit)
			break
		}
		reply.Jobs, err = c.store.List(ctx, store.ListParams{Group: req.Group, Task: req.Task, State: req.State, Limit: req.Limit})
	case events.VerbExecutors:
		if !admin {
			err = fairway.Invalid("verb", "executors is an operator verb: ask on %s", c.subjects.Admin(events.VerbExecutors))
			break
		}
		reply.Executors, err = c.store.Executors(ctx)
	case events.VerbPeriodicSave, events.VerbPeriodicList, events.VerbPeriodicEnable, events.VerbPeriodicDisable,
		events.VerbPeriodicRunNow, events.VerbPeriodicDelete:
		if !admin {
			err = fairway.Invalid("verb", "%s is an operator verb: ask on %s", verb, c.subjects.Admin(verb))
			break
		}
		reply.Periodic, err = c.handlePeriodic(ctx, verb, msg.Data, time.Now())
	default:
		err = fairway.Invalid("verb", "unknown verb %q (known: submit, cancel, get, logs, list, release, priority, executors, periodic-save, periodic-list, periodic-enable, periodic-disable, periodic-run-now, periodic-delete)", verb)
	}
	c.respond(msg, reply, err)
}

// jobGroup is the group of the job a request names. Job ids are unique per
// group only, so the operator API needs the group in the body; the tenant
// API takes it from the subject, and refuses a body naming another.
func jobGroup(subject, body string, admin bool) (string, error) {
	switch {
	case admin && body == "":
		return "", fairway.Invalid("group", "missing: job ids are unique per group only, so name the job's group")
	case admin:
		return body, fairway.CheckName("group", body)
	case body != "" && body != subject:
		return "", fairway.Invalid("group", "body names group %q but the subject names %q", body, subject)
	}
	return subject, nil
}

func decode(data []byte, v any) error {
	if len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fairway.Invalid("body", "not a valid request: %v", err)
	}
	// Strings go to PostgreSQL, which refuses NUL and bytes that are not
	// UTF-8 (the decoder turns those into U+FFFD, so the raw body is checked).
	return fairway.CheckJSONText(data)
}

// respond sends the reply, or err as a coded error: the one place where
// errors become API replies.
func (c *Coordinator) respond(msg *nats.Msg, reply events.Reply, err error) {
	if msg.Reply == "" {
		return
	}
	if err != nil {
		reply = events.Reply{Error: c.replyError(msg.Subject, err)}
	}
	data, err := json.Marshal(reply)
	if err != nil {
		data, _ = json.Marshal(events.Reply{Error: c.replyError(msg.Subject, err)})
	}
	if err := msg.Respond(data); err != nil {
		c.log.Debug("api reply not sent", "subject", msg.Subject, "error", err)
	}
}

// replyError is err as the coded error a reply carries. Internal and
// unavailable errors carry no internal text (PostgreSQL's errors, say) to
// tenants: only a request id, under which the detail is logged.
func (c *Coordinator) replyError(subject string, err error) *fairway.Error {
	e := fairway.AsError(err)
	switch e.Code {
	case fairway.CodeInternal, fairway.CodeUnavailable:
		id := fairway.NewID()
		c.log.Error("api request failed", "request_id", id, "subject", subject, "code", e.Code, "error", err)
		message := "internal error"
		if e.Code == fairway.CodeUnavailable {
			message = "temporarily unavailable: try again"
		}
		return &fairway.Error{Code: e.Code, Message: message + "; request id " + id, RequestID: id}
	}
	return e
}

// submit stores one submission from the request/reply API. Invalid ones
// get a rejected event, as on the asynchronous path.
func (c *Coordinator) submit(ctx context.Context, group string, data []byte) (*fairway.Job, error) {
	sub, err := c.validate(ctx, group, "", data, time.Now(), nil)
	if err != nil {
		_, ierr := c.store.InsertJobs(ctx, nil, []store.Rejection{rejection(sub, group, "", err)})
		if ierr == nil {
			c.kickOutbox()
		}
		return nil, err
	}
	res, err := c.store.InsertJobs(ctx, []fairway.Submission{sub}, nil)
	if err != nil {
		return nil, err
	}
	c.kickOutbox()
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	if res[0].Created {
		c.jobsAdded(sub)
	}
	return c.store.Get(ctx, sub.Group, sub.ID)
}

// validate decodes and checks a submission for the group and task of its
// subject (task "" on the API, where the body names it). received is when
// the submission arrived. A body without an id gets defaultID's, when
// given, before anything else (a rejection names it too); else Normalize
// makes a new one.
func (c *Coordinator) validate(ctx context.Context, group, task string, data []byte, received time.Time, defaultID func() string) (fairway.Submission, error) {
	sub, err := fairway.DecodeSubmission(data, c.cfg.MaxArgsSize)
	if sub.ID == "" && defaultID != nil {
		sub.ID = defaultID()
	}
	if err != nil {
		return sub, err
	}
	if err := sub.Normalize(group, task, c.cfg.MaxArgsSize, *c.cfg.Retries); err != nil {
		return sub, err
	}
	if err := c.tasks.check(ctx, sub.Task, received); err != nil {
		return sub, err
	}
	return sub, nil
}

func rejection(sub fairway.Submission, group, task string, err error) store.Rejection {
	return store.Rejection{JobID: sub.ID, Group: group, Task: cmp.Or(task, sub.Task), Err: fairway.AsError(err)}
}

// jobsAdded wakes executors for a job that is due now, or remembers when
// it will be.
func (c *Coordinator) jobsAdded(subs ...fairway.Submission) {
	now := time.Now()
	notify := false
	for _, s := range subs {
		if s.RunAt != nil && s.RunAt.After(now) {
			c.due.add(*s.RunAt)
		} else {
			notify = true
		}
	}
	if notify {
		c.notifyWork()
	}
}

// cancelJob cancels a job and tells its executor when it holds it.
func (c *Coordinator) cancelJob(ctx context.Context, group, id string) (*fairway.Job, error) {
	res, err := c.store.Cancel(ctx, group, id)
	if err != nil {
		return nil, err
	}
	c.kickOutbox()
	if res.Signal {
		// The claim counted the attempt it handed out: the executor holds
		// exactly this one, scheduled or running.
		data, _ := json.Marshal(events.CancelCommand{Group: res.Job.Group, JobID: id, Attempt: res.Job.Attempt})
		if err := c.nc.Publish(c.subjects.Cancel(res.Job.Worker), data); err != nil {
			return nil, fmt.Errorf("telling executor %q to cancel job %s: %w", res.Job.Worker, id, err)
		}
	}
	return &res.Job, nil
}
