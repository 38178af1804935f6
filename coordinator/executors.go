package coordinator

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/wirejson"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
)

// dispatcher speaks the executor protocol: it registers and deregisters
// executors, records their heartbeats (which renew their jobs' leases),
// and answers their dispatch requests with the jobs it claims for them,
// fairly. A request that finds no job waits, parked, until work may be
// eligible (a long poll, see parking): its goroutine (parkLoop) serves the
// parked requests when notifyWork says so, here or on another coordinator,
// and answers them empty at their deadline. It keeps the task cache fresh
// as executors register. Its subscriptions are queue subscriptions shared
// by all coordinators, but for the work notifications, which every
// coordinator hears.
type dispatcher struct {
	cfg      dispatchConfig
	store    *store.Store
	nc       *nats.Conn
	subjects events.Subjects
	log      *slog.Logger
	metrics  *coordMetrics
	tracer   trace.Tracer
	tasks    *taskCache // refreshed when an executor registers
	parking  *parking
	notifyID []byte // this coordinator's name in its work notifications
	// afterChange follows up the jobs released when an executor restarts
	// (Coordinator.afterChange), and kickOutbox publishes the events of
	// the claims (relay.kick).
	afterChange func([]store.Applied)
	kickOutbox  func()
	// respond and replyError are the request/reply API's
	// (Coordinator.respond, Coordinator.replyError): registrations are
	// answered as API requests are, and a dispatch reply's error is coded
	// as theirs.
	respond    func(msg *nats.Msg, reply events.Reply, err error)
	replyError func(subject string, err error) *fairway.Error

	heartbeatsDropped atomic.Int64 // beyond their executor's lane (a flood)
	// refusedLog bounds the lines about refused protocol messages, which a
	// rogue credential can send as many of as it likes.
	refusedLog *logLimit

	regMu sync.Mutex
	regs  map[registrationKey]registration // what instances registered, briefly (registrationTTL)

	grants grants // what each executor credential may run
	// ownResults makes sure that an executor that reached the
	// coordinators through its account (operator mode) has its own
	// results stream, which its reports need (Coordinator.ownResults).
	ownResults func(ctx context.Context, appID string) error
}

// registrationKey is an executor instance; registration what it
// registered, as read at.
type (
	registrationKey struct{ app, instance string }
	registration    struct {
		slots int
		tasks map[string]bool
		at    time.Time
	}
)

// registrationTTL is how long a coordinator trusts what it read of an
// instance's registration. An instance registers once (a new one has a new
// id); that it is still live is checked by every claim.
const registrationTTL = 5 * time.Second

// registration returns what the instance registered, if it is the live
// registered instance of its app-id (else a not-registered error).
func (d *dispatcher) registration(ctx context.Context, app, instance string) (registration, error) {
	key := registrationKey{app, instance}
	d.regMu.Lock()
	r, ok := d.regs[key]
	d.regMu.Unlock()
	if ok && time.Since(r.at) < registrationTTL {
		return r, nil
	}
	slots, tasks, err := d.store.Registration(ctx, app, instance)
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

// dispatchConfig configures the dispatcher.
type dispatchConfig struct {
	// Lease is how long a job handed to an executor stays its own without
	// a heartbeat (Config.Lease). Defaults to LeaseDefault.
	Lease time.Duration
	// Scheme is the counting scheme of the claims (Config.Scheme).
	// Defaults to 4,1.
	Scheme fairway.CountingScheme
	// Fairness is what a group's turn is worth (Config.Fairness).
	Fairness string
	// RetryDelay is the delay before the first retry (Config.RetryDelay),
	// of the jobs of an executor's previous instance. Defaults to
	// RetryDelayDefault.
	RetryDelay time.Duration
	// HeartbeatTimeout is how long an executor may stay silent before
	// another instance may take over its app-id (Config.HeartbeatTimeout).
	// Defaults to HeartbeatTimeoutDefault.
	HeartbeatTimeout time.Duration
}

func (c dispatchConfig) withDefaults() dispatchConfig {
	if c.Scheme == (fairway.CountingScheme{}) {
		c.Scheme = fairway.CountingScheme{High: 4, Low: 1}
	}
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	c.RetryDelay = cmp.Or(c.RetryDelay, RetryDelayDefault)
	c.HeartbeatTimeout = cmp.Or(c.HeartbeatTimeout, HeartbeatTimeoutDefault)
	return c
}

func newDispatcher(cfg dispatchConfig, st *store.Store, nc *nats.Conn, subjects events.Subjects, log *slog.Logger, m *coordMetrics,
	tracer trace.Tracer, tasks *taskCache, afterChange func([]store.Applied), kickOutbox func(),
	respond func(*nats.Msg, events.Reply, error), replyError func(string, error) *fairway.Error) *dispatcher {
	return &dispatcher{cfg: cfg.withDefaults(), store: st, nc: nc, subjects: subjects, log: log, metrics: m, tracer: tracer,
		tasks: tasks, parking: newParking(), notifyID: []byte(fairway.NewID()),
		afterChange: afterChange, kickOutbox: kickOutbox, respond: respond, replyError: replyError, refusedLog: newLogLimit(10)}
}

// start answers executors: registration, deregistration, dispatch
// requests and heartbeats. Its subscriptions go to subs, which Stop
// drains.
func (d *dispatcher) start(ctx context.Context, subs *subscriptions, goLoop func(context.Context, func(context.Context))) error {
	// The executor protocol runs on a pool with a lane per app-id (as the
	// tenant API does per group): a subscription's callback only queues
	// the message, so one executor's flood of requests or heartbeats never
	// makes a subscription a slow consumer that drops the others'
	// messages, never grows this process's memory past the lanes' bounds,
	// and waits behind its own requests only.
	pool := newAPIPool(execWorkers, execPerApp, execQueue)
	pool.lane = "executor"
	for range execWorkers {
		goLoop(ctx, func(context.Context) { pool.work() })
	}
	goLoop(ctx, func(ctx context.Context) {
		<-ctx.Done()
		for _, task := range pool.close() {
			task() // each sees ctx done
		}
	})
	lane := func(handle func(context.Context, *nats.Msg), refused func(*nats.Msg, error)) nats.MsgHandler {
		return func(msg *nats.Msg) {
			appID, _, _ := d.subjects.ParseExec(msg.Subject)
			err := pool.add(appID, len(msg.Data), func() {
				if ctx.Err() != nil {
					refused(msg, &fairway.Error{Code: fairway.CodeUnavailable, Message: "coordinator stopping"})
					return
				}
				handle(ctx, msg)
			})
			if err != nil {
				refused(msg, err)
			}
		}
	}
	answer := func(msg *nats.Msg, err error) { d.respond(msg, events.Reply{}, err) }
	answerDispatch := func(msg *nats.Msg, err error) {
		d.respondDispatch(msg, events.DispatchReply{Error: d.replyError(msg.Subject, err)})
	}
	if err := subs.subscribe(d.subjects.ExecAll(events.ExecRegister), lane(d.register, answer)); err != nil {
		return err
	}
	if err := subs.subscribe(d.subjects.ExecAll(events.ExecDeregister), lane(d.deregister, answer)); err != nil {
		return err
	}
	if err := subs.subscribe(d.subjects.ExecAll(events.ExecDispatch), lane(d.dispatch, answerDispatch)); err != nil {
		return err
	}
	// Every coordinator hears every work notification, to serve the
	// dispatch requests it holds.
	if err := subs.listen(d.subjects.NotifyWork(), func(msg *nats.Msg) {
		if !bytes.Equal(msg.Data, d.notifyID) { // another coordinator's
			d.parking.signal()
		}
	}); err != nil {
		return err
	}
	// A heartbeat beyond its executor's lane is dropped: the next one
	// comes within a heartbeat period, and a live executor sends few.
	return subs.subscribe(d.subjects.ExecAll(events.ExecHeartbeat), lane(d.heartbeat, func(*nats.Msg, error) { d.heartbeatsDropped.Add(1) }))
}

// The executor protocol's pool (see start): workers, requests of one
// app-id running at once, and requests waiting in all (an app-id's lane an
// eighth of them).
const (
	execWorkers = 16
	execPerApp  = 4
	execQueue   = 4096
)

// notifyWork wakes idle executors: new work may be eligible.
func (d *dispatcher) notifyWork() {
	d.parking.signal()
	// Named, so that this coordinator, which signalled its own parked
	// requests above, does not serve them again when it hears itself.
	if err := d.nc.Publish(d.subjects.NotifyWork(), d.notifyID); err != nil {
		d.log.Debug("publishing a work notification", "error", err)
	}
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
	released, err := d.store.RegisterExecutor(ctx, e, d.cfg.RetryDelay, d.alive)
	if err != nil {
		d.log.Warn("executor refused", "executor", e.AppID, "host", e.Host, "error", err)
		d.respond(msg, events.Reply{}, err)
		return
	}
	if len(released) > 0 {
		d.log.Warn("executor restarted: released the jobs of its previous instance", "executor", e.AppID, "jobs", len(released))
		d.afterChange(released)
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

func (d *dispatcher) dispatch(ctx context.Context, msg *nats.Msg) {
	var req events.DispatchRequest
	err := decode(msg.Data, &req)
	if err == nil {
		req.Executor, err = d.sender(msg, req.Executor)
	}
	var maxHeld int
	if err == nil {
		maxHeld, err = d.bound(ctx, &req)
	}
	if err == nil {
		var grant events.Grant
		if grant, err = d.grants.of(msg); err == nil {
			narrow(&req, grant)
		}
	}
	if err != nil {
		if errors.Is(err, fairway.ErrNotRegistered) && d.refusedLog.allow(d.log, "dispatch requests of instances not registered") {
			d.log.Warn("dispatch request from an executor instance that is not registered; told it to register again",
				"executor", req.Executor, "instance", req.Instance)
		}
		d.respondDispatch(msg, events.DispatchReply{Error: d.replyError(msg.Subject, err)})
		return
	}
	gen := d.parking.generation()
	jobs, err := d.claim(ctx, req, maxHeld)
	if err != nil {
		d.respondDispatch(msg, events.DispatchReply{Error: d.replyError(msg.Subject, err)})
		return
	}
	if len(jobs) == 0 && req.WaitMS > 0 && req.Slots > 0 && ctx.Err() == nil {
		wait := min(time.Duration(req.WaitMS)*time.Millisecond, maxParkWait)
		if old := d.parking.park(&parkedRequest{msg: msg, req: req, deadline: time.Now().Add(wait), maxHeld: maxHeld}, gen); old != nil {
			d.respondDispatch(old.msg, events.DispatchReply{})
		}
		return
	}
	d.respondDispatch(msg, events.DispatchReply{Jobs: jobs})
}

// maxHeldPerSlot bounds how many jobs an instance may hold at once, as the
// coordinators count them: ten times its registered slots. Its pool and as
// many held ready are two; the rest is the jobs it finished whose reports
// the coordinators have not applied yet, which count as held until then
// (an executor asks for what it has free): with short jobs they are
// hundreds, and a cap of three times the slots cost the drain benchmark a
// fifth of its throughput. However it asks (many requests, each parked),
// an instance gathers no more.
const maxHeldPerSlot = 10

// claim claims jobs for a dispatch request, its instance holding at most
// maxHeld (bound's answer).
func (d *dispatcher) claim(ctx context.Context, req events.DispatchRequest, maxHeld int) ([]fairway.Job, error) {
	if req.Slots <= 0 || len(req.Tasks) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	// A request sent again under the same id (its answer was lost) gets
	// the jobs it claimed, rather than leave them scheduled until their
	// lease runs out.
	reclaimed := func(n int) {
		d.log.Warn("dispatch request sent again after a lost answer: handing out again the jobs it claimed",
			"executor", req.Executor, "request_id", req.RequestID, "jobs", n)
	}
	start := time.Now()
	jobs, err := d.store.Claim(ctx, store.ClaimParams{Executor: req.Executor, Instance: req.Instance, ClaimID: req.RequestID, MaxHeld: maxHeld,
		Reclaimed: reclaimed, Limit: req.Slots, Tasks: req.Tasks, Groups: req.Groups, Lease: d.cfg.Lease, Scheme: d.cfg.Scheme, Fairness: d.cfg.Fairness, TaskLimits: req.TaskSlots})
	switch {
	case errors.Is(err, fairway.ErrNotRegistered):
		if d.refusedLog.allow(d.log, "dispatch requests of instances not registered") {
			d.log.Warn("dispatch request from an executor instance that is not registered; told it to register again",
				"executor", req.Executor, "instance", req.Instance)
		}
		return nil, err
	case err != nil:
		if ctx.Err() == nil {
			d.log.Error("claiming jobs", "executor", req.Executor, "error", err)
		}
		return nil, err
	}
	if len(jobs) > 0 {
		observe(d.metrics.claimJobs, d.metrics.claimTime, len(jobs), start)
		d.traceClaim(ctx, jobs, req.Executor, start)
		d.kickOutbox()
	}
	return jobs, nil
}

// handedOver answers a parked dispatch request with the jobs that ingest
// stored for it, as a claim would have.
func (d *dispatcher) handedOver(ctx context.Context, r *parkedRequest, jobs []fairway.Job, start time.Time) {
	d.metrics.handedOver.Add(float64(len(jobs)))
	d.traceClaim(ctx, jobs, r.req.Executor, start)
	d.respondDispatch(r.msg, events.DispatchReply{Jobs: jobs})
}

func (d *dispatcher) respondDispatch(msg *nats.Msg, reply events.DispatchReply) {
	data, _ := wirejson.Marshal(reply)
	if err := msg.Respond(data); err != nil {
		// The executor's request times out and is sent again under the same
		// id, which hands these jobs out again (see claim). An executor that
		// does not ask again leaves them scheduled until their lease runs
		// out; then they run elsewhere.
		d.log.Warn("dispatch reply not sent", "error", err, "jobs", len(reply.Jobs))
	}
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
	if err := d.store.Heartbeat(ctx, hb.Executor, hb.Instance, hb.Jobs, d.cfg.Lease); err != nil {
		d.log.Debug("heartbeat not recorded", "executor", hb.Executor, "error", err)
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
