package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
)

// The wait verb: an API request held until its job ends (Celery's
// AsyncResult.get, Temporal's Get), answered with the final job. The
// request does not hold a worker of the API's pool while it waits: it is
// parked here, and answered when the job's final event comes by (every
// coordinator hears the events the leader publishes, on core NATS), or
// when its wait runs out, with the job as it is then.

// Bounds of the waits a coordinator holds: a tenant that asks for many
// gets a quota error past its share, never this process's memory (a wait
// held keeps its reply subject, its group and job id, a few hundred
// bytes; a body larger than maxWaitBody is refused).
const (
	maxWaits         = 10_000
	maxWaitsPerGroup = 1_000
	maxWaitBody      = 4 << 10
)

// waitLinger is how long a group's subscriptions to its final events stay
// after its last wait is answered: a client that submits and waits, job
// after job, does not subscribe anew each time.
const waitLinger = 30 * time.Second

// waitEnds are the final states that end a wait, heard by a group's
// subscriptions while it has waits. Rejections end them too: every
// coordinator hears every rejection from its start (rejections.go).
var waitEnds = []fairway.State{fairway.StateSuccess, fairway.StateFailed, fairway.StateCancelled}

// waits are the wait requests this coordinator holds, by group and job.
type waits struct {
	c  *Coordinator
	mu sync.Mutex
	n  int
	// groups: the waits of a group, and its subscriptions to the final
	// events of its jobs (made with its first wait, dropped with its last).
	groups map[string]*groupWaits
}

type groupWaits struct {
	subs []*nats.Subscription
	// ready is closed once the server has the subscriptions' interest
	// (their first wait flushed them); subscribed says whether it did.
	ready      chan struct{}
	subscribed error
	jobs       map[string][]*waitRequest
	n          int
	// linger drops the subscriptions waitLinger after the last wait.
	linger *time.Timer
}

// waitRequest is one wait request held.
type waitRequest struct {
	msg   *nats.Msg
	group string
	id    string
	once  sync.Once
	// timer ends the wait; answered, it is answered (both under waits.mu).
	timer    *time.Timer
	answered bool
}

func newWaits(c *Coordinator) *waits {
	return &waits{c: c, groups: map[string]*groupWaits{}}
}

// apiWait holds the request until the job ends or its wait runs out. It
// answers at once when the job has ended already; errRepliedLater
// otherwise (handleVerb then sends nothing: the wait answers).
func (c *Coordinator) apiWait(ctx context.Context, r request) (events.Reply, error) {
	if len(r.data) > maxWaitBody {
		return events.Reply{}, fairway.Invalid("body", "a wait request of %d bytes: at most %d", len(r.data), maxWaitBody)
	}
	var req events.WaitRequest
	if err := decode(r.data, &req); err != nil {
		return events.Reply{}, err
	}
	if req.ID == "" {
		return events.Reply{}, fairway.Invalid("id", "missing: name the job")
	}
	if len(req.ID) > fairway.MaxIDLength {
		return events.Reply{}, fairway.Invalid("id", "%d bytes: at most %d", len(req.ID), fairway.MaxIDLength)
	}
	if req.WaitMS < 0 || req.WaitMS > events.MaxWaitMS {
		return events.Reply{}, fairway.Invalid("wait_ms", "%d: between 0 and %d (ask again for longer)", req.WaitMS, events.MaxWaitMS)
	}
	group, err := jobGroup(r.group, req.Group, r.admin)
	if err != nil {
		return events.Reply{}, err
	}
	wait := time.Duration(cmp.Or(req.WaitMS, events.MaxWaitMS)) * time.Millisecond
	// Only what the reply needs is kept: not the request's body and
	// headers, for as long as the wait is held.
	w := &waitRequest{msg: &nats.Msg{Subject: r.msg.Subject, Reply: r.msg.Reply, Sub: r.msg.Sub}, group: group, id: req.ID}
	// Heard before read: an end committed after the read below comes by
	// as an event, and one committed before is in the read.
	if err := c.waits.add(ctx, w); err != nil {
		return events.Reply{}, err
	}
	job, err := c.parts.of(group).get(ctx, group, req.ID)
	var rej *fairway.Error
	if errors.Is(err, fairway.ErrNotFound) {
		rej = c.rejections.of(group, req.ID)
	}
	switch {
	case err == nil && job.State.Final():
		c.waits.answer(w, job, nil)
	case rej != nil:
		// Rejected before the wait came.
		c.waits.answer(w, nil, rej)
	case err != nil && !errors.Is(err, fairway.ErrNotFound):
		// Not found: not stored yet (a submission still on its way), or
		// never: the wait tells at its end.
		c.waits.answer(w, nil, err)
	default:
		c.waits.arm(w, wait)
	}
	return events.Reply{}, errRepliedLater
}

// errRepliedLater: the handler answers the request itself, later.
var errRepliedLater = errors.New("answered later")

// add holds w, subscribing to its group's final events if it is the
// group's first, and returns once the server has their interest: the
// first wait of a group flushes the subscriptions (a round trip, without
// the lock), the others wait for it.
func (ws *waits) add(ctx context.Context, w *waitRequest) error {
	g, fresh, err := ws.hold(w)
	if err != nil {
		return err
	}
	if fresh {
		err = ws.c.nc.FlushWithContext(ctx)
		g.subscribed = err // written once, read after ready is closed
		close(g.ready)
	} else {
		select {
		case <-g.ready:
			if g.subscribed != nil {
				err = ws.c.nc.FlushWithContext(ctx) // the first flush failed: this wait's own
			}
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		ws.answer(w, nil, &fairway.Error{Code: fairway.CodeUnavailable, Message: fmt.Sprintf("subscribing to the events of group %s: %v", w.group, err)})
		return errRepliedLater
	}
	return nil
}

// hold holds w, making its group's subscriptions if it has none (fresh).
func (ws *waits) hold(w *waitRequest) (g *groupWaits, fresh bool, err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	g = ws.groups[w.group]
	switch {
	case ws.n >= maxWaits:
		return nil, false, &fairway.Error{Code: fairway.CodeUnavailable, Message: fmt.Sprintf("this coordinator holds %d waits, its most: ask again later", maxWaits)}
	case g != nil && g.n >= maxWaitsPerGroup:
		return nil, false, &fairway.Error{Code: fairway.CodeQuota, Message: fmt.Sprintf("group %s has %d waits held on this coordinator, its most: wait for fewer jobs at once", w.group, maxWaitsPerGroup)}
	}
	if g == nil {
		// Subscribing only queues the interest for the server (add
		// flushes it, without this lock).
		g, fresh = &groupWaits{jobs: map[string][]*waitRequest{}, ready: make(chan struct{})}, true
		for _, st := range waitEnds {
			sub, err := ws.c.nc.Subscribe(ws.c.subjects.EventFilter(w.group, "", st), ws.heard)
			if err != nil {
				g.unsubscribe()
				return nil, false, &fairway.Error{Code: fairway.CodeUnavailable, Message: fmt.Sprintf("subscribing to the events of group %s: %v", w.group, err)}
			}
			g.subs = append(g.subs, sub)
		}
		ws.groups[w.group] = g
	}
	if g.linger != nil {
		g.linger.Stop()
		g.linger = nil
	}
	g.jobs[w.id] = append(g.jobs[w.id], w)
	g.n++
	ws.n++
	return g, fresh, nil
}

// heard answers the waits of the jobs whose final event (or rejection)
// a message carries.
func (ws *waits) heard(msg *nats.Msg) {
	evs, err := events.DecodeEvents(msg.Data)
	if err != nil {
		return
	}
	ws.answerEvents(evs)
}

// answerEvents answers the waits of the jobs whose final event (or
// rejection) is among evs.
func (ws *waits) answerEvents(evs []events.Event) {
	for _, ev := range evs {
		if !ev.State.Final() && ev.State != fairway.StateRejected {
			continue
		}
		ws.mu.Lock()
		var held []*waitRequest
		if g := ws.groups[ev.Group]; g != nil {
			held = slices.Clone(g.jobs[ev.JobID]) // drop changes the group's slice in place
		}
		ws.mu.Unlock()
		for _, w := range held {
			if ev.State == fairway.StateRejected {
				go ws.answer(w, nil, &fairway.Error{Code: cmp.Or(ev.Code, fairway.CodeInvalid), Field: ev.Field, JobID: ev.JobID, Message: ev.Error})
			} else {
				go ws.end(w)
			}
		}
	}
}

// end answers w with its job as it is now: final when its end was heard,
// else what its wait ran out on (not found: never stored).
func (ws *waits) end(w *waitRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	job, err := ws.c.parts.of(w.group).get(ctx, w.group, w.id)
	if rej := ws.c.rejections.of(w.group, w.id); errors.Is(err, fairway.ErrNotFound) && rej != nil {
		err = rej // its rejection heard, but not by the wait's own subscriptions
	}
	ws.answer(w, job, err)
}

// arm ends w's wait after wait, unless it is answered already.
func (ws *waits) arm(w *waitRequest, wait time.Duration) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if !w.answered {
		w.timer = time.AfterFunc(wait, func() { ws.end(w) })
	}
}

// answer sends w's reply, once, and lets it go.
func (ws *waits) answer(w *waitRequest, job *fairway.Job, err error) {
	w.once.Do(func() {
		ws.mu.Lock()
		w.answered = true
		if w.timer != nil {
			w.timer.Stop()
		}
		ws.mu.Unlock()
		ws.drop(w)
		reply := events.Reply{Job: job}
		if err == nil && job != nil {
			fitJob(&reply, ws.c.maxReply())
		}
		ws.c.respond(w.msg, reply, err)
	})
}

// drop forgets w, and its group's subscriptions with its group's last wait.
func (ws *waits) drop(w *waitRequest) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	g := ws.groups[w.group]
	if g == nil {
		return
	}
	held := g.jobs[w.id]
	for i, o := range held {
		if o == w {
			held = append(held[:i], held[i+1:]...)
			g.n--
			ws.n--
			break
		}
	}
	if len(held) == 0 {
		delete(g.jobs, w.id)
	} else {
		g.jobs[w.id] = held
	}
	if g.n == 0 && g.linger == nil {
		g.linger = time.AfterFunc(waitLinger, func() { ws.unlinger(w.group, g) })
	}
}

// unlinger drops a group's subscriptions if it has had no wait since its
// linger began.
func (ws *waits) unlinger(group string, g *groupWaits) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.groups[group] == g && g.n == 0 {
		g.unsubscribe()
		delete(ws.groups, group)
	}
}

func (g *groupWaits) unsubscribe() {
	for _, s := range g.subs {
		_ = s.Unsubscribe()
	}
}

// held counts the waits held (tests).
func (ws *waits) held() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.n
}

// stop answers every wait held with its job as it is (the coordinator
// stops: the client asks again, another coordinator answers).
func (ws *waits) stop() {
	ws.mu.Lock()
	var all []*waitRequest
	for _, g := range ws.groups {
		for _, held := range g.jobs {
			all = append(all, held...)
		}
	}
	ws.mu.Unlock()
	for _, w := range all {
		ws.answer(w, nil, &fairway.Error{Code: fairway.CodeUnavailable, Message: "coordinator stopping: ask again"})
	}
}
