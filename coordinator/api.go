package coordinator

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/nats-io/nats.go"
)

// apiTimeout bounds the work behind one API request.
const apiTimeout = 10 * time.Second

func (c *Coordinator) startAPI(ctx context.Context) error {
	pool := newAPIPool(c.cfg.APIWorkers, c.cfg.APIGroupWorkers, c.cfg.APIQueue)
	for range c.cfg.APIWorkers {
		c.goLoop(ctx, func(context.Context) { pool.work() })
	}
	c.goLoop(ctx, func(ctx context.Context) {
		<-ctx.Done()
		// Requests still waiting see ctx done and answer unavailable.
		for _, task := range pool.close() {
			task()
		}
	})
	// The subscriptions' callbacks only check the rate quota and queue the
	// request: a slow request holds a worker, never the subscription.
	enqueue := func(msg *nats.Msg, lane string, r request, verb string) {
		task := func() {
			if ctx.Err() != nil {
				c.respond(msg, events.Reply{}, &fairway.Error{Code: fairway.CodeUnavailable, Message: "coordinator stopping"})
				return
			}
			if hook := c.apiHook.Load(); hook != nil {
				(*hook)(r.group, verb)
			}
			c.handle(ctx, msg, r, verb)
		}
		if err := pool.add(lane, len(msg.Data), task); err != nil {
			c.respond(msg, events.Reply{}, err)
		}
	}
	// route queues a request received on subject (its own, or the one a
	// follower received it on and forwarded it from: the follower checked
	// the group's rate already).
	route := func(msg *nats.Msg, subject string, forwarded bool) {
		if verb, ok := c.subjects.ParseAdmin(subject); ok {
			enqueue(msg, operatorLane(msg), request{admin: true, data: msg.Data, forwarded: forwarded, msg: msg}, verb)
			return
		}
		group, verb, _ := c.subjects.ParseAPI(subject)
		if err := fairway.CheckName("group", group); err != nil {
			c.respond(msg, events.Reply{}, err)
			return
		}
		if !forwarded {
			if ok, wait := c.apiRate.allow(group, time.Now()); !ok {
				c.respond(msg, events.Reply{}, c.apiRate.quotaError(group, wait))
				return
			}
		}
		enqueue(msg, group, request{group: group, data: msg.Data, forwarded: forwarded, msg: msg}, verb)
	}
	// The requests followers forward (forwardToLeader), answered while
	// this coordinator leads.
	c.leaderAPI.setHandler(func(msg *nats.Msg) {
		if subject, ok := c.subjects.ParseToLeader(msg.Subject); ok {
			route(msg, subject, true)
		}
	})
	if err := c.subs.subscribe(c.subjects.APIAll(), func(msg *nats.Msg) { route(msg, msg.Subject, false) }); err != nil {
		return err
	}
	return c.subs.subscribe(c.subjects.AdminAll(), func(msg *nats.Msg) { route(msg, msg.Subject, false) })
}

// operatorLane is the pool lane of an operator-API request. Operators
// share one lane of their own, "" (no group's name), unless the request
// names another lane the coordinators know (events.LaneHeader): a web
// server sends its read-only users' requests in one and its admins' in
// another, so that a read-only user flooding the dashboard delays neither
// an admin nor the operator's CLI. The operator API is trusted, so its
// requests may pick their lane; a lane the coordinators do not know is the
// operator's (the lanes stay few). These lanes' names start with '/',
// which no group's name holds.
func operatorLane(msg *nats.Msg) string {
	switch lane := events.Lane(msg); lane {
	case events.LaneWebReadOnly, events.LaneWebAdmin:
		return operatorLanePrefix + lane
	}
	return ""
}

// operatorLanePrefix starts the name of an operator-API lane other than
// the operator's own.
const operatorLanePrefix = "/"

// request is one API request: its subject's group (a tenant's) or the
// operator API, and its body.
type request struct {
	group string // the subject's group; "" on the operator API
	verb  string
	admin bool
	data  []byte
	// maxReply is the largest reply the NATS server takes (see maxReply).
	maxReply int
	// encoded receives the reply of a handler that encodes it itself, so
	// as to measure it once (list); handle sends it as it is.
	encoded *[]byte
	// forwarded: a follower of the journal's partition forwarded it to
	// this coordinator, its leader (forwardToLeader).
	forwarded bool
	// msg is the request's message, for a handler that answers it later
	// (wait: errRepliedLater).
	msg *nats.Msg
}

// scope says on which API a verb is offered.
type scope int

const (
	tenantAndAdmin scope = iota // fairway.api.<group>.<verb> and fairway.admin.<verb>
	tenantOnly                  // fairway.api.<group>.<verb>
	adminOnly                   // fairway.admin.<verb>
)

// apiVerb is one verb of the request/reply API: where it is offered and
// what answers it. Each handler decodes its body with decode.
type apiVerb struct {
	scope  scope
	handle func(c *Coordinator, ctx context.Context, r request) (events.Reply, error)
}

// apiVerbs is the request/reply API, verb by verb.
var apiVerbs = map[string]apiVerb{
	events.VerbSubmit:          {tenantOnly, (*Coordinator).apiSubmit},
	events.VerbGet:             {tenantAndAdmin, jobVerb((*Coordinator).apiGet)},
	events.VerbWait:            {tenantAndAdmin, (*Coordinator).apiWait},
	events.VerbCancel:          {tenantAndAdmin, jobVerb((*Coordinator).apiCancel)},
	events.VerbLogs:            {tenantAndAdmin, (*Coordinator).apiLogs},
	events.VerbRelease:         {tenantAndAdmin, jobVerb((*Coordinator).apiRelease)},
	events.VerbPriority:        {tenantAndAdmin, jobVerb((*Coordinator).apiPriority)},
	events.VerbList:            {tenantAndAdmin, (*Coordinator).apiList},
	events.VerbExecutors:       {adminOnly, (*Coordinator).apiExecutors},
	events.VerbPrune:           {adminOnly, (*Coordinator).apiPrune},
	events.VerbRetry:           {tenantAndAdmin, jobVerb((*Coordinator).apiRetry)},
	events.VerbStats:           {tenantAndAdmin, (*Coordinator).apiStats},
	events.VerbBulk:            {tenantAndAdmin, (*Coordinator).apiBulk},
	events.VerbDrain:           {adminOnly, (*Coordinator).apiDrain},
	events.VerbPause:           {adminOnly, (*Coordinator).apiPause},
	events.VerbWorkflow:        {tenantOnly, (*Coordinator).apiWorkflow},
	events.VerbGraph:           {tenantAndAdmin, jobVerb((*Coordinator).apiGraph)},
	events.VerbLimits:          {adminOnly, (*Coordinator).apiLimits},
	events.VerbLimitSet:        {adminOnly, (*Coordinator).apiLimits},
	events.VerbLimitDelete:     {adminOnly, (*Coordinator).apiLimits},
	events.VerbRateSet:         {adminOnly, (*Coordinator).apiLimits},
	events.VerbRateDelete:      {adminOnly, (*Coordinator).apiLimits},
	events.VerbGroups:          {adminOnly, (*Coordinator).apiGroups},
	events.VerbPartitions:      {adminOnly, (*Coordinator).apiPartitions},
	events.VerbWeightSet:       {adminOnly, (*Coordinator).apiGroups},
	events.VerbPeriodicSave:    {adminOnly, periodicVerb(events.VerbPeriodicSave)},
	events.VerbPeriodicList:    {adminOnly, periodicVerb(events.VerbPeriodicList)},
	events.VerbPeriodicEnable:  {adminOnly, periodicVerb(events.VerbPeriodicEnable)},
	events.VerbPeriodicDisable: {adminOnly, periodicVerb(events.VerbPeriodicDisable)},
	events.VerbPeriodicRunNow:  {adminOnly, periodicVerb(events.VerbPeriodicRunNow)},
	events.VerbPeriodicDelete:  {adminOnly, periodicVerb(events.VerbPeriodicDelete)},
}

// knownVerbs lists the verbs, for the error about an unknown one.
var knownVerbs = func() string {
	names := slices.Sorted(maps.Keys(apiVerbs))
	return strings.Join(names, ", ")
}()

// callerDeadlineKey keys the deadline a request names (events.DeadlineHeader)
// in its context.
type callerDeadlineKey struct{}

// handle answers one API request.
func (c *Coordinator) handle(ctx context.Context, msg *nats.Msg, r request, name string) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if d, ok := events.Deadline(msg); ok {
		// The caller gives up then: a submission over its group's rate
		// waits no longer (quotas.waitSubmits). Only that wait: a clock
		// behind the client's does not fail every request.
		ctx = context.WithValue(ctx, callerDeadlineKey{}, d)
	}
	var reply events.Reply
	v, ok := apiVerbs[name]
	var err error
	ctx, span := c.apiSpan(ctx, msg.Header, name)
	defer func() { endSpan(span, err) }()
	switch {
	case !ok:
		err = fairway.Invalid("verb", "unknown verb %q (known: %s)", name, knownVerbs)
	case v.scope == tenantOnly && r.admin:
		err = fairway.Invalid("verb", "%s through %s instead: the group leads the subject", name, c.subjects.API("<group>", name))
	case v.scope == adminOnly && !r.admin:
		err = fairway.Invalid("verb", "%s is an operator verb: ask on %s", name, c.subjects.Admin(name))
	case !r.forwarded && leaderVerbs[name] && !c.routes():
		var data []byte
		data, err = c.forwardToLeader(ctx, msg)
		switch {
		case err == nil:
			c.send(msg, data)
			return
		case errors.Is(err, errLeadsNow):
			err = c.handleVerb(ctx, msg, r, name, v)
			return
		}
	default:
		err = c.handleVerb(ctx, msg, r, name, v)
		return
	}
	c.respond(msg, reply, err)
}

// handleVerb answers a request with its verb's handler, and returns the
// handler's error (for the request's span).
func (c *Coordinator) handleVerb(ctx context.Context, msg *nats.Msg, r request, name string, v apiVerb) error {
	var encoded []byte
	r.maxReply, r.encoded, r.verb = c.maxReply(), &encoded, name
	reply, err := v.handle(c, ctx, r)
	if errors.Is(err, errRepliedLater) {
		return nil
	}
	if err == nil && encoded != nil {
		c.send(msg, encoded)
		return nil
	}
	if err == nil && reply.Job != nil {
		fitJob(&reply, r.maxReply)
	}
	c.respond(msg, reply, err)
	return err
}

func (c *Coordinator) apiSubmit(ctx context.Context, r request) (events.Reply, error) {
	job, err := c.submit(ctx, r.group, r.data)
	if err != nil {
		return events.Reply{}, err
	}
	reply := events.Reply{ID: job.ID, Job: job}
	if job.NoExecutor {
		reply.Warning = fmt.Sprintf("no live executor runs task %q: the job waits until one registers", job.Task)
	}
	return reply, nil
}

// jobVerb decodes a request naming one job, and finds the job's group.
func jobVerb(f func(c *Coordinator, ctx context.Context, group string, req events.JobRequest) (events.Reply, error)) func(*Coordinator, context.Context, request) (events.Reply, error) {
	return func(c *Coordinator, ctx context.Context, r request) (events.Reply, error) {
		var req events.JobRequest
		if err := decode(r.data, &req); err != nil {
			return events.Reply{}, err
		}
		if req.ID == "" {
			return events.Reply{}, fairway.Invalid("id", "missing: name the job")
		}
		group, err := jobGroup(r.group, req.Group, r.admin)
		if err != nil {
			return events.Reply{}, err
		}
		return f(c, ctx, group, req)
	}
}

func (c *Coordinator) apiGet(ctx context.Context, group string, req events.JobRequest) (events.Reply, error) {
	job, err := c.parts.of(group).get(ctx, group, req.ID)
	return events.Reply{Job: job}, err
}

func (c *Coordinator) apiCancel(ctx context.Context, group string, req events.JobRequest) (events.Reply, error) {
	job, err := c.journalCancel(ctx, group, req.ID)
	return events.Reply{Job: job}, err
}

func (c *Coordinator) apiRelease(ctx context.Context, group string, req events.JobRequest) (events.Reply, error) {
	job, err := c.journalRelease(ctx, group, req.ID)
	return events.Reply{Job: job}, err
}

func (c *Coordinator) apiPriority(ctx context.Context, group string, req events.JobRequest) (events.Reply, error) {
	job, err := c.journalPriority(ctx, group, req.ID, req.Priority)
	return events.Reply{Job: job}, err
}

func (c *Coordinator) apiExecutors(ctx context.Context, _ request) (events.Reply, error) {
	executors, err := c.store.Executors(ctx)
	return events.Reply{Executors: executors}, err
}

func periodicVerb(verb string) func(*Coordinator, context.Context, request) (events.Reply, error) {
	return func(c *Coordinator, ctx context.Context, r request) (events.Reply, error) {
		periodic, err := c.handlePeriodic(ctx, verb, r.data, time.Now())
		return events.Reply{Periodic: periodic}, err
	}
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

// decode reads a request body: the one decoding policy of every request
// the coordinators answer (API, periodic tasks, executor protocol). An
// empty body is an empty request; unknown fields are refused, so a
// misspelt field is an error rather than silently ignored.
func decode(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fairway.Invalid("body", "not a valid request: %v", err)
	}
	if dec.More() {
		return fairway.Invalid("body", "not a valid request: more than one JSON value")
	}
	// Strings go to PostgreSQL, which refuses NUL and bytes that are not
	// UTF-8 (the decoder turns those into U+FFFD, so the raw body is checked).
	return fairway.CheckJSONText(data)
}

// respond sends the reply, or err as a coded error: the one place where
// errors become API replies. A reply larger than the NATS server takes
// (the handlers cap theirs, so this is a bug) becomes an error reply
// rather than none.
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
	c.send(msg, data)
}

// send sends an encoded reply, or an error reply in its place when it is
// larger than the NATS server takes.
func (c *Coordinator) send(msg *nats.Msg, data []byte) {
	if limit := c.nc.MaxPayload(); limit > 0 && int64(len(data)) > limit {
		id := fairway.NewID()
		c.log.Error("api reply too large; answered with an error", "request_id", id, "subject", msg.Subject, "bytes", len(data), "max_payload", limit)
		data, _ = json.Marshal(events.Reply{Error: &fairway.Error{Code: fairway.CodeInternal, RequestID: id,
			Message: fmt.Sprintf("the reply (%d bytes) exceeds the NATS server's max_payload (%d bytes); request id %s", len(data), limit, id)}})
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
		level, message := slog.LevelError, "internal error"
		if e.Code == fairway.CodeUnavailable {
			level, message = slog.LevelWarn, "temporarily unavailable: try again"
		}
		c.log.Log(context.Background(), level, "request failed", "request_id", id, "subject", subject, "code", e.Code, "error", err)
		return &fairway.Error{Code: e.Code, Message: message + "; request id " + id, RequestID: id}
	}
	return e
}

// submit stores one submission from the request/reply API. Invalid ones
// get a rejected event, as on the asynchronous path.
func (c *Coordinator) submit(ctx context.Context, group string, data []byte) (*fairway.Job, error) {
	sub, err := c.ingest.validate(ctx, group, "", data, time.Now(), nil)
	traceSubmission(ctx, &sub)
	if err == nil {
		err = c.quotas.admitOne(ctx, sub)
	}
	if err != nil {
		ierr := c.store.Reject(ctx, []store.Rejection{rejection(sub, group, "", err)})
		if ierr == nil {
			c.relay.kick()
		}
		return nil, err
	}
	return c.journalSubmit(ctx, sub)
}

func rejection(sub fairway.Submission, group, task string, err error) store.Rejection {
	return store.Rejection{JobID: sub.ID, Group: group, Task: cmp.Or(task, sub.Task), Err: fairway.AsError(err)}
}
