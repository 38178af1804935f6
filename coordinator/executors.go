package coordinator

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/wirejson"
	"github.com/fairwayhq/fairway/store"
	"github.com/nats-io/nats.go"
)

// startExecutorProtocol answers executors: registration, deregistration,
// dispatch requests and heartbeats.
func (c *Coordinator) startExecutorProtocol(ctx context.Context) error {
	if err := c.subscribe(c.subjects.ExecAll(events.ExecRegister), func(msg *nats.Msg) { c.register(ctx, msg) }); err != nil {
		return err
	}
	if err := c.subscribe(c.subjects.ExecAll(events.ExecDeregister), func(msg *nats.Msg) { c.deregister(ctx, msg) }); err != nil {
		return err
	}
	if err := c.subscribe(c.subjects.ExecAll(events.ExecDispatch), func(msg *nats.Msg) { c.dispatch(ctx, msg) }); err != nil {
		return err
	}
	// Every coordinator hears every work notification, to serve the
	// dispatch requests it holds.
	notify, err := c.nc.Subscribe(c.subjects.NotifyWork(), func(msg *nats.Msg) {
		if !bytes.Equal(msg.Data, c.notifyID) { // another coordinator's
			c.parking.signal()
		}
	})
	if err != nil {
		return err
	}
	c.subs = append(c.subs, notify)
	periodic, err := c.nc.Subscribe(c.subjects.NotifyPeriodic(), func(*nats.Msg) { c.periodic.kick() })
	if err != nil {
		return err
	}
	c.subs = append(c.subs, periodic)
	return c.subscribe(c.subjects.ExecAll(events.ExecHeartbeat), func(msg *nats.Msg) { c.heartbeat(ctx, msg) })
}

// sender returns the app-id an executor protocol message was sent under.
// The subject is the executor's identity (in operator mode its credential
// can publish under its own app-id only); a body naming another executor
// is refused.
func (c *Coordinator) sender(msg *nats.Msg, named string) (string, error) {
	appID, _, ok := c.subjects.ParseExec(msg.Subject)
	if !ok {
		return "", fairway.Invalid("subject", "not an executor protocol subject: %s", msg.Subject)
	}
	if err := fairway.CheckName("app-id", appID); err != nil {
		return "", err
	}
	if named != "" && named != appID {
		return "", fairway.Invalid("executor", "names executor %q but was sent under app-id %q: an executor speaks only for itself", named, appID)
	}
	return appID, nil
}

func (c *Coordinator) register(ctx context.Context, msg *nats.Msg) {
	var req events.RegisterRequest
	if err := decode(msg.Data, &req); err != nil {
		c.respond(msg, events.Reply{}, err)
		return
	}
	e := req.Executor
	appID, err := c.sender(msg, e.AppID)
	if err != nil {
		c.log.Warn("executor registration refused", "subject", msg.Subject, "error", err)
		c.respond(msg, events.Reply{}, err)
		return
	}
	e.AppID = appID
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	released, err := c.store.RegisterExecutor(ctx, e, c.cfg.RetryDelay, c.alive)
	if err != nil {
		c.log.Warn("executor refused", "executor", e.AppID, "host", e.Host, "error", err)
		c.respond(msg, events.Reply{}, err)
		return
	}
	if len(released) > 0 {
		c.log.Warn("executor restarted: released the jobs of its previous instance", "executor", e.AppID, "jobs", len(released))
		c.afterChange(released)
	}
	if err := c.tasks.refresh(ctx); err != nil {
		c.log.Warn("refreshing the known tasks", "error", err)
	}
	c.log.Info("executor registered", "executor", e.AppID, "host", e.Host, "slots", e.Slots, "tasks", strings.Join(e.Tasks, ","))
	c.respond(msg, events.Reply{}, nil)
}

// deregister records that an executor instance shut down gracefully: its
// tasks no longer count as run. Only the registered instance is
// deregistered; an older one that shuts down late changes nothing.
func (c *Coordinator) deregister(ctx context.Context, msg *nats.Msg) {
	var req events.DeregisterRequest
	err := decode(msg.Data, &req)
	if err == nil {
		req.Executor, err = c.sender(msg, req.Executor)
	}
	if err == nil && req.Instance == "" {
		err = fairway.Invalid("instance", "missing: name the instance that shuts down")
	}
	if err != nil {
		c.log.Warn("executor deregistration refused", "subject", msg.Subject, "error", err)
		c.respond(msg, events.Reply{}, err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if err := c.store.DeregisterExecutor(ctx, req.Executor, req.Instance); err != nil {
		c.log.Info("executor deregistration not applied", "executor", req.Executor, "instance", req.Instance, "error", err)
		c.respond(msg, events.Reply{}, err)
		return
	}
	c.log.Info("executor deregistered: it shut down", "executor", req.Executor, "instance", req.Instance)
	c.respond(msg, events.Reply{}, nil)
}

// alive tells whether the executor instance prev still runs: it has sent a
// heartbeat recently and answers a ping.
func (c *Coordinator) alive(prev fairway.Executor) bool {
	if time.Since(prev.LastHeartbeat) > c.cfg.HeartbeatTimeout {
		return false
	}
	// The ping names the instance: only it answers, not a newer or older
	// instance of the same app-id. The answer comes back under the
	// executor's own app-id (its credential can publish nowhere else).
	pong := c.subjects.Pong(prev.AppID, fairway.NewID())
	sub, err := c.nc.SubscribeSync(pong)
	if err != nil {
		return false
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.nc.PublishMsg(&nats.Msg{Subject: c.subjects.Ping(prev.AppID), Reply: pong, Data: []byte(prev.Instance)}); err != nil {
		return false
	}
	reply, err := sub.NextMsg(time.Second)
	return err == nil && string(reply.Data) == prev.Instance
}

func (c *Coordinator) dispatch(ctx context.Context, msg *nats.Msg) {
	var req events.DispatchRequest
	err := decode(msg.Data, &req)
	if err == nil {
		req.Executor, err = c.sender(msg, req.Executor)
	}
	if err != nil {
		c.respondDispatch(msg, events.DispatchReply{Error: c.replyError(msg.Subject, err)})
		return
	}
	gen := c.parking.generation()
	jobs, err := c.claim(ctx, req)
	if err != nil {
		c.respondDispatch(msg, events.DispatchReply{Error: c.replyError(msg.Subject, err)})
		return
	}
	if len(jobs) == 0 && req.WaitMS > 0 && req.Slots > 0 && ctx.Err() == nil {
		wait := min(time.Duration(req.WaitMS)*time.Millisecond, maxParkWait)
		c.parking.park(&parkedRequest{msg: msg, req: req, deadline: time.Now().Add(wait)}, gen)
		return
	}
	c.respondDispatch(msg, events.DispatchReply{Jobs: jobs})
}

// claim claims jobs for a dispatch request.
func (c *Coordinator) claim(ctx context.Context, req events.DispatchRequest) ([]fairway.Job, error) {
	if req.Slots <= 0 || len(req.Tasks) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	// A request sent again under the same id (its answer was lost) gets
	// the jobs it claimed, rather than leave them scheduled until their
	// lease runs out.
	reclaimed := func(n int) {
		c.log.Warn("dispatch request sent again after a lost answer: handing out again the jobs it claimed",
			"executor", req.Executor, "request_id", req.RequestID, "jobs", n)
	}
	start := time.Now()
	jobs, err := c.store.Claim(ctx, store.ClaimParams{Worker: req.Executor, Instance: req.Instance, ClaimID: req.RequestID,
		Reclaimed: reclaimed, Limit: req.Slots, Tasks: req.Tasks, Lease: c.cfg.Lease, Scheme: c.cfg.Scheme, TaskLimits: req.TaskSlots})
	switch {
	case errors.Is(err, fairway.ErrNotRegistered):
		c.log.Warn("dispatch request from an executor instance that is not registered; told it to register again",
			"executor", req.Executor, "instance", req.Instance)
		return nil, err
	case err != nil:
		if ctx.Err() == nil {
			c.log.Error("claiming jobs", "executor", req.Executor, "error", err)
		}
		return nil, err
	}
	if len(jobs) > 0 {
		observe(c.metrics.claimJobs, c.metrics.claimTime, len(jobs), start)
		c.traceClaim(ctx, jobs, req.Executor, start)
		c.relay.kick()
	}
	return jobs, nil
}

func (c *Coordinator) respondDispatch(msg *nats.Msg, reply events.DispatchReply) {
	data, _ := wirejson.Marshal(reply)
	if err := msg.Respond(data); err != nil {
		// The executor's request times out and is sent again under the same
		// id, which hands these jobs out again (see claim). An executor that
		// does not ask again leaves them scheduled until their lease runs
		// out; then they run elsewhere.
		c.log.Warn("dispatch reply not sent", "error", err, "jobs", len(reply.Jobs))
	}
}

func (c *Coordinator) heartbeat(ctx context.Context, msg *nats.Msg) {
	var hb events.Heartbeat
	err := decode(msg.Data, &hb)
	if err == nil {
		hb.Executor, err = c.sender(msg, hb.Executor)
	}
	if err != nil {
		c.log.Warn("heartbeat refused", "subject", msg.Subject, "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if err := c.store.Heartbeat(ctx, hb.Executor, hb.Instance, hb.Jobs, c.cfg.Lease); err != nil {
		c.log.Debug("heartbeat not recorded", "executor", hb.Executor, "error", err)
	}
}

// taskCache holds the tasks some registered executor runs, so that a
// submission of a task nobody runs is refused with a clear error.
//
// An executor registers through one coordinator of the queue group; the
// others learn its tasks from the store. So a task missing from the cache is
// looked up in the store before it is refused, unless the cache was read
// after the submission arrived. Concurrent lookups share one read.
type taskCache struct {
	store *store.Store
	log   *slog.Logger

	refreshMu sync.Mutex // held while the store is read: one read at a time

	mu    sync.RWMutex
	tasks []string
	asOf  time.Time // when the read that returned tasks began
}

// refresh reads the known tasks from the store.
func (t *taskCache) refresh(ctx context.Context) error {
	t.refreshMu.Lock()
	defer t.refreshMu.Unlock()
	return t.refreshLocked(ctx)
}

func (t *taskCache) refreshLocked(ctx context.Context) error {
	began := time.Now()
	tasks, err := t.store.KnownTasks(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.tasks, t.asOf = tasks, began
	t.mu.Unlock()
	return nil
}

// lookup refuses task if no executor in the cache runs it, and tells
// whether the cache was read at or after received.
func (t *taskCache) lookup(task string, received time.Time) (fresh bool, err error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	fresh = !t.asOf.Before(received)
	if len(t.tasks) == 0 || slices.Contains(t.tasks, task) {
		return fresh, nil
	}
	return fresh, fairway.Invalid("task", "unknown task %q: no executor has registered it (known tasks: %s)", task, strings.Join(t.tasks, ", "))
}

// check refuses a task that no registered executor runs. received is when
// the submission arrived: a task some executor registered before then is
// accepted, through whichever coordinator it registered. Before any
// executor registered, every task is accepted. When the store cannot be
// read, the task is accepted too: a job wrongly refused is lost, one wrongly
// accepted waits for an executor that runs its task.
func (t *taskCache) check(ctx context.Context, task string, received time.Time) error {
	if fresh, err := t.lookup(task, received); err == nil || fresh {
		return err
	}
	t.refreshMu.Lock()
	defer t.refreshMu.Unlock()
	// A read that began while this one waited for the lock may do.
	if fresh, err := t.lookup(task, received); err == nil || fresh {
		return err
	}
	if err := t.refreshLocked(ctx); err != nil {
		t.log.Warn("reading the known tasks failed; accepting the task unchecked", "task", task, "error", err)
		return nil
	}
	_, err := t.lookup(task, received)
	return err
}
