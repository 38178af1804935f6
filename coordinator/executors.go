package coordinator

import (
	"context"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	istore "github.com/fairwayhq/fairway/internal/store"
	"github.com/nats-io/nats.go"
)

// The executor registry: registrations, deregistrations and heartbeats,
// which the dispatcher answers (dispatcher.go).

// registration returns what the instance registered, if it is the live
// registered instance of its app-id (else a not-registered error). While
// the home database (the registry's) cannot be reached, an instance read
// before keeps what was read (a registration is written there: none
// changes meanwhile), read again every homeRetry, so that the partitions
// in other databases go on dispatching.
func (d *dispatcher) registration(ctx context.Context, app, instance string) (registration, error) {
	key := registrationKey{app, instance}
	d.regMu.Lock()
	r, ok := d.regs[key]
	d.regMu.Unlock()
	if ok && time.Since(r.at) < registrationTTL {
		return r, nil
	}
	slots, tasks, err := d.store.Registration(ctx, app, instance)
	if ok && istore.Unreachable(err) {
		r.at = time.Now().Add(homeRetry - registrationTTL)
		d.regMu.Lock()
		d.regs[key] = r
		d.regMu.Unlock()
		return r, nil
	}
	if err != nil {
		return registration{}, err
	}
	r = registration{slots: slots, tasks: make(map[string]bool, len(tasks)), at: time.Now()}
	for _, t := range tasks {
		r.tasks[t] = true
	}
	d.regMu.Lock()
	defer d.regMu.Unlock()
	if d.regs == nil || len(d.regs) >= 10_000 {
		d.regs = map[registrationKey]registration{} // instances come and go: start afresh
	}
	d.regs[key] = r
	return r, nil
}

// bound keeps a dispatch request within what its instance registered: its
// tasks among the registered ones, its slots at most twice the registered
// slots (its pool, and as many jobs held ready).
// An executor credential that never registered, or asks for tasks it did
// not register, gets no job of them. It returns how many jobs the instance
// may hold at once (maxHeld).
func (d *dispatcher) bound(ctx context.Context, req *events.DispatchRequest) (maxHeld int, err error) {
	if req.Instance == "" {
		return 0, fairway.Invalid("instance", "missing: register first (%s), then ask for jobs under the instance you registered", d.subjects.Exec(req.Executor, events.ExecRegister))
	}
	reg, err := d.registration(ctx, req.Executor, req.Instance)
	if err != nil {
		return 0, err
	}
	// The pool and as many held (executor.Config.Prefetch, PoolSize by
	// default): an executor asks for more than its pool when its jobs are
	// short.
	req.Slots = min(req.Slots, 2*reg.slots)
	tasks := req.Tasks[:0:0]
	for _, t := range req.Tasks {
		if reg.tasks[t] {
			tasks = append(tasks, t)
		}
	}
	req.Tasks = tasks
	for t := range req.TaskSlots {
		if !reg.tasks[t] {
			delete(req.TaskSlots, t)
		}
	}
	return maxHeldPerSlot * reg.slots, nil
}

// sender returns the app-id an executor protocol message was sent under.
// The subject is the executor's identity (in operator mode its credential
// can publish under its own app-id only); a body naming another executor
// is refused.
func (d *dispatcher) sender(msg *nats.Msg, named string) (string, error) {
	appID, _, ok := d.subjects.ParseExec(msg.Subject)
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

func (d *dispatcher) register(ctx context.Context, msg *nats.Msg) {
	var req events.RegisterRequest
	if err := decode(msg.Data, &req); err != nil {
		d.respond(msg, events.Reply{}, err)
		return
	}
	e := req.Executor
	appID, err := d.sender(msg, e.AppID)
	if err != nil {
		if d.refusedLog.allow(d.log, "executor protocol messages refused") {
			d.log.Warn("executor registration refused", "subject", msg.Subject, "error", err)
		}
		d.respond(msg, events.Reply{}, err)
		return
	}
	e.AppID = appID
	grant, err := d.grants.of(msg)
	if err == nil {
		err = checkRegistration(e, grant)
	}
	if err != nil {
		if d.refusedLog.allow(d.log, "executor protocol messages refused") {
			d.log.Warn("executor registration refused", "executor", appID, "error", err)
		}
		d.respond(msg, events.Reply{}, err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if msg.Header.Get(events.RequestInfoHeader) != "" && d.ownResults != nil {
		// Through an account's import: its reports arrive in a stream of
		// its own, which 'fairway creds add executor' makes; one provisioned
		// before gets it here, before it sends any.
		if err := d.ownResults(ctx, appID); err != nil {
			d.log.Error("executor refused: its results stream cannot be made", "executor", appID, "error", err)
			d.respond(msg, events.Reply{}, err)
			return
		}
	}
	// The jobs a previous instance of the app-id held are released by the
	// journal's leader at its next sweep (journal.Leader.ReleaseLost: an
	// instance replaced by a newer one is lost).
	if err := d.store.RegisterExecutor(ctx, e, d.alive); err != nil {
		d.log.Warn("executor refused", "executor", e.AppID, "host", e.Host, "error", err)
		d.respond(msg, events.Reply{}, err)
		return
	}
	if err := d.tasks.refresh(ctx); err != nil {
		d.log.Warn("refreshing the known tasks", "error", err)
	}
	d.log.Info("executor registered", "executor", e.AppID, "host", e.Host, "slots", e.Slots, "tasks", strings.Join(e.Tasks, ","))
	d.respond(msg, events.Reply{}, nil)
}

// deregister records that an executor instance shut down gracefully: its
// tasks no longer count as run. Only the registered instance is
// deregistered; an older one that shuts down late changes nothing.
func (d *dispatcher) deregister(ctx context.Context, msg *nats.Msg) {
	var req events.DeregisterRequest
	err := decode(msg.Data, &req)
	if err == nil {
		req.Executor, err = d.sender(msg, req.Executor)
	}
	if err == nil && req.Instance == "" {
		err = fairway.Invalid("instance", "missing: name the instance that shuts down")
	}
	if err != nil {
		d.log.Warn("executor deregistration refused", "subject", msg.Subject, "error", err)
		d.respond(msg, events.Reply{}, err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if err := d.store.DeregisterExecutor(ctx, req.Executor, req.Instance); err != nil {
		d.log.Info("executor deregistration not applied", "executor", req.Executor, "instance", req.Instance, "error", err)
		d.respond(msg, events.Reply{}, err)
		return
	}
	d.log.Info("executor deregistered: it shut down", "executor", req.Executor, "instance", req.Instance)
	d.respond(msg, events.Reply{}, nil)
}

// alive tells whether the executor instance prev still runs: it has sent a
// heartbeat recently and answers a ping.
func (d *dispatcher) alive(prev fairway.Executor) bool {
	if time.Since(prev.LastHeartbeat) > d.cfg.HeartbeatTimeout {
		return false
	}
	// The ping names the instance: only it answers, not a newer or older
	// instance of the same app-id. The answer comes back under the
	// executor's own app-id (its credential can publish nowhere else).
	pong := d.subjects.Pong(prev.AppID, fairway.NewID())
	sub, err := d.nc.SubscribeSync(pong)
	if err != nil {
		return false
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := d.nc.PublishMsg(&nats.Msg{Subject: d.subjects.Ping(prev.AppID), Reply: pong, Data: []byte(prev.Instance)}); err != nil {
		return false
	}
	reply, err := sub.NextMsg(time.Second)
	return err == nil && string(reply.Data) == prev.Instance
}

func (d *dispatcher) heartbeat(ctx context.Context, msg *nats.Msg) {
	var hb events.Heartbeat
	err := decode(msg.Data, &hb)
	if err == nil {
		hb.Executor, err = d.sender(msg, hb.Executor)
	}
	if err != nil {
		if d.refusedLog.allow(d.log, "executor protocol messages refused") {
			d.log.Warn("heartbeat refused", "subject", msg.Subject, "error", err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if err := d.store.Heartbeat(ctx, hb.Executor, hb.Instance, len(hb.Jobs)); err != nil {
		d.log.Debug("heartbeat not recorded", "executor", hb.Executor, "error", err)
		return // no answer: the executor sends it again, to any coordinator
	}
	if msg.Reply != "" {
		// Recorded: the executor stops sending this one again.
		_ = msg.Respond(nil)
	}
}
