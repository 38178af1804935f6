package coordinator

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/wirejson"
	"github.com/nats-io/nats.go"
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
	cfg dispatchConfig
	serviceBase
	tasks    *taskCache // refreshed when an executor registers
	parking  *parking
	notifyID []byte // this coordinator's name in its work notifications
	// notes spaces the work notifications published (notifyWork).
	notes trailingLimit
	// respond and replyError are the request/reply API's
	// (Coordinator.respond, Coordinator.replyError): registrations are
	// answered as API requests are, and a dispatch reply's error is coded
	// as theirs.
	respond    func(msg *nats.Msg, reply events.Reply, err error)
	replyError func(subject string, err error) *fairway.Error

	// parts are the journal's partitions, whose leaders claim the jobs
	// (Coordinator.onJournal sets them).
	parts partitions
	// cluster counts the limits over the partitions (nil: one).
	cluster *clusterLimits
	// spreads are the instances' spreads over the partitions
	// (claimSpread).
	spreadMu sync.Mutex
	spreads  map[registrationKey]*instanceSpread
	// Only the journal's leader answers dispatch requests (serveDispatch).
	leaderDispatch *leaderOnly

	heartbeatsDropped atomic.Int64 // beyond their executor's lane (a flood)
	// refusedLog bounds the lines about refused protocol messages, which a
	// rogue credential can send as many of as it likes.
	refusedLog *logLimit
	// unavailableLog bounds the lines about claims answered unavailable
	// (the partition's database down: every executor asks again each
	// second, under the same id).
	unavailableLog *logLimit

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
	c.HeartbeatTimeout = cmp.Or(c.HeartbeatTimeout, HeartbeatTimeoutDefault)
	return c
}

func newDispatcher(cfg dispatchConfig, b serviceBase, tasks *taskCache,
	respond func(*nats.Msg, events.Reply, error), replyError func(string, error) *fairway.Error) *dispatcher {
	return &dispatcher{cfg: cfg.withDefaults(), serviceBase: b,
		tasks: tasks, parking: newParking(), notifyID: []byte(fairway.NewID()),
		respond: respond, replyError: replyError, refusedLog: newLogLimit(10), unavailableLog: newLogLimit(1),
		leaderDispatch: &leaderOnly{nc: b.nc, log: b.log, subject: b.subjects.ExecAll(events.ExecDispatch), what: "dispatch requests"}}
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
	d.leaderDispatch.setHandler(lane(d.dispatch, answerDispatch)) // served while leading: serveDispatch
	// Every coordinator hears every work notification, to serve the
	// dispatch requests it holds.
	if err := subs.listen(d.subjects.NotifyWork(), func(msg *nats.Msg) {
		if !bytes.Equal(msg.Data, d.notifyID) { // another coordinator's
			// It may have stored jobs: a follower's fold of a batch its
			// ingest stored makes them claimable in its state, and its
			// journal.LeaderConfig.Claimable is notifyWork. The leader
			// reads the journal's tail now rather than at its next poll
			// (50 ms), and its fold signals the parked requests if they
			// made work.
			for _, e := range d.parts {
				if e.leads.Load() {
					e.leader.Wake()
				}
			}
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

// serveDispatch answers executors' dispatch requests (on) or stops (off),
// with the journal engine, where only the partition's leader can claim:
// it is told when this coordinator comes to lead and when it stops
// (journal.LeaderConfig.Leading), so that a request never waits at a
// follower, and while no coordinator leads an executor hears no responder
// and waits for the new leader's work notification. The requests in hand
// when it stops are answered (drained).
func (d *dispatcher) serveDispatch(on bool) { d.leaderDispatch.serve(on) }

// notifyWork wakes idle executors: new work may be eligible. This
// coordinator's parked requests are served at once; the notification,
// which every executor and coordinator hears, is published at most every
// notifyEvery (the last call within one is published at its end). The
// requests that wait are parked at the leader, which the signal serves:
// the notification wakes the executors that wait for one (no leader
// answered them, or one answered empty at once), which also ask every
// WakeupPeriod, and, from a follower, the leader, which then reads the
// journal's tail (the follower may have stored jobs) rather than at its
// next poll. Published for every job that came or ended, it cost two
// messages a job at low load, delivered to every executor.
func (d *dispatcher) notifyWork() {
	d.parking.signal()
	d.notes.do(notifyEvery, func() {
		// Named, so that this coordinator, which signalled its own
		// parked requests above, does not serve them again when it
		// hears itself.
		if err := d.nc.Publish(d.subjects.NotifyWork(), d.notifyID); err != nil {
			d.log.Debug("publishing a work notification", "error", err)
		}
	})
}

// notifyEvery is how often a coordinator publishes a work notification at
// most.
const notifyEvery = 50 * time.Millisecond

// trailingLimit runs what it is given at most once every period: a call
// within the period after the last run is run at its end, once for all
// the calls meanwhile.
type trailingLimit struct {
	mu      sync.Mutex
	last    time.Time
	pending bool
}

// do runs f now, or at the end of the period that began with the last
// run (once, whatever the calls meanwhile).
func (l *trailingLimit) do(period time.Duration, f func()) {
	l.mu.Lock()
	if l.pending {
		l.mu.Unlock()
		return
	}
	wait := period - time.Since(l.last)
	if wait <= 0 {
		l.last = time.Now()
		l.mu.Unlock()
		f()
		return
	}
	l.pending = true
	l.mu.Unlock()
	time.AfterFunc(wait, func() {
		l.mu.Lock()
		l.pending, l.last = false, time.Now()
		l.mu.Unlock()
		f()
	})
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
	if err == nil && req.Stopping {
		d.stop(msg, req)
		return
	}
	if err == nil && d.parking.stopping.has(req.Executor, req.Instance) {
		// Sent before its instance said it stops, and come after.
		d.respondDispatch(msg, events.DispatchReply{})
		return
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
	if req.Idle != nil && *req.Idle == 0 && req.WaitMS > 0 && req.Slots > 0 &&
		d.parking.idleFor(&parkedRequest{req: req}) {
		// It would only hold what it gets, while an executor with a free
		// slot waits for work that came (a wake is pending): it waits its
		// turn, after that one (the parked requests are served then, those
		// with a free slot first).
		d.park(msg, req, maxHeld, gen)
		return
	}
	jobs, err := d.claim(ctx, req, maxHeld)
	if err != nil {
		d.respondDispatch(msg, events.DispatchReply{Error: d.replyError(msg.Subject, err)})
		return
	}
	if len(jobs) == 0 && req.WaitMS > 0 && req.Slots > 0 && ctx.Err() == nil {
		d.park(msg, req, maxHeld, gen)
		return
	}
	d.respondDispatch(msg, events.DispatchReply{Jobs: jobs})
}

// park holds a dispatch request until work is eligible (parking.park; gen
// is the generation read before its claim), at most its wait_ms.
func (d *dispatcher) park(msg *nats.Msg, req events.DispatchRequest, maxHeld int, gen uint64) {
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, maxParkWait)
	if old := d.parking.park(&parkedRequest{msg: msg, req: req, deadline: time.Now().Add(wait), maxHeld: maxHeld}, gen); old != nil {
		d.respondDispatch(old.msg, events.DispatchReply{})
	}
}

// stop records that an executor instance stops (a dispatch request with
// Stopping, sent before it releases the jobs it holds): its parked request
// is answered empty, it gets no job from now on, and the jobs it releases
// give their attempt back (journal.Item.GiveBack). The answer tells it
// that the leader knows, before it releases anything.
func (d *dispatcher) stop(msg *nats.Msg, req events.DispatchRequest) {
	if req.Instance == "" {
		d.respondDispatch(msg, events.DispatchReply{Error: d.replyError(msg.Subject, fairway.Invalid("instance", "missing: name the instance that stops"))})
		return
	}
	if r := d.parking.stop(req.Executor, req.Instance); r != nil {
		d.respondDispatch(r.msg, events.DispatchReply{})
	}
	d.log.Info("executor stopping: it gets no more jobs", "executor", req.Executor, "instance", req.Instance)
	d.respondDispatch(msg, events.DispatchReply{})
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
	p := store.ClaimParams{Executor: req.Executor, Instance: req.Instance, ClaimID: req.RequestID, MaxHeld: maxHeld,
		Reclaimed: reclaimed, Limit: req.Slots, Tasks: req.Tasks, Groups: req.Groups, Lease: d.cfg.Lease, Scheme: d.cfg.Scheme, Fairness: d.cfg.Fairness, TaskLimits: req.TaskSlots}
	var jobs []fairway.Job
	var err error
	if len(d.parts) == 1 {
		jobs, err = d.parts[0].claim(ctx, p)
	} else {
		jobs, err = d.claimSpread(ctx, p)
	}
	switch {
	case errors.Is(err, fairway.ErrNotRegistered):
		if d.refusedLog.allow(d.log, "dispatch requests of instances not registered") {
			d.log.Warn("dispatch request from an executor instance that is not registered; told it to register again",
				"executor", req.Executor, "instance", req.Instance)
		}
		return nil, err
	case errors.Is(err, fairway.ErrUnavailable):
		if ctx.Err() == nil && d.unavailableLog.allow(d.log, "claims answered unavailable") {
			d.log.Warn("claiming jobs: answered unavailable; the executor asks again under the same id", "executor", req.Executor, "error", err)
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
