package coordinator

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
)

// maxParkWait caps how long a dispatch request is held, whatever it asks:
// below the executors' request timeout.
const maxParkWait = 3 * time.Second

// parkedRequest is a dispatch request held until work is eligible (a long
// poll): new work then reaches an idle executor in the reply it is already
// waiting for, without a notify and another request.
type parkedRequest struct {
	msg      *nats.Msg
	req      events.DispatchRequest
	deadline time.Time
	gen      uint64 // the wake signals counted before its claim found nothing
	// maxHeld caps the jobs its instance holds with those handed to it
	// (store.ClaimParams.MaxHeld).
	maxHeld int
}

// idle says whether the request would start a job at once: its executor
// has a free slot (or did not say: events.DispatchRequest.Idle).
func (r *parkedRequest) idle() bool { return r.req.Idle == nil || *r.req.Idle > 0 }

// parking holds the dispatch requests of idle executors.
type parking struct {
	mu   sync.Mutex
	reqs []*parkedRequest
	gen  uint64 // counts wake signals, to catch one that raced a park
	wake chan struct{}
	// parked tells the loop a request arrived, so it sets its timer to the
	// earliest deadline.
	parked chan struct{}
	// stopping are the executor instances that said they stop: their
	// requests get no job (the dispatcher's and the hand-over's), and what
	// they release gives its attempt back (journalEngine.report).
	stopping stoppingInstances
}

func newParking() *parking {
	return &parking{wake: make(chan struct{}, 1), parked: make(chan struct{}, 1)}
}

// signal says work may be eligible: parked requests are tried again.
func (p *parking) signal() {
	p.mu.Lock()
	p.gen++
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *parking) generation() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen
}

// park holds r. If a wake signal came since gen (the generation read before
// the claim that found nothing), it is tried again at once. An executor
// instance has one request parked at most: an older one of r's instance
// is returned, to be answered empty (each parked request may be handed
// jobs, so many of them would hold more than the instance's slots). A
// request of an instance that said it stops is not held but returned, to
// be answered empty.
func (p *parking) park(r *parkedRequest, gen uint64) (replaced *parkedRequest) {
	p.mu.Lock()
	if p.stopping.has(r.req.Executor, r.req.Instance) {
		p.mu.Unlock()
		return r // sent before its instance said it stops, and come after
	}
	r.gen = gen
	for i, old := range p.reqs {
		if sameInstance(old, r) {
			replaced = old
			p.reqs = append(p.reqs[:i], p.reqs[i+1:]...)
			break
		}
	}
	p.reqs = append(p.reqs, r)
	missed := p.gen != gen
	p.mu.Unlock()
	if missed {
		p.signal()
	}
	select {
	case p.parked <- struct{}{}:
	default:
	}
	return replaced
}

// sameInstance says whether two requests come from one executor instance.
func sameInstance(a, b *parkedRequest) bool {
	return a.req.Executor == b.req.Executor && a.req.Instance == b.req.Instance
}

// take removes and returns every parked request, those of executors with
// a free slot first (idle), oldest first within each: a job goes to an
// executor that starts it at once before one that would hold it behind a
// running job.
func (p *parking) take() []*parkedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	reqs := p.reqs
	p.reqs = nil
	slices.SortStableFunc(reqs, func(a, b *parkedRequest) int {
		switch {
		case a.idle() == b.idle():
			return 0
		case a.idle():
			return -1
		default:
			return 1
		}
	})
	return reqs
}

// idleFor says whether a request of an executor with a free slot for one
// of tasks is parked (another instance's than r's): r, which would only
// hold what it gets, then waits its turn among the parked requests.
func (p *parking) idleFor(r *parkedRequest) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range p.reqs {
		// One whose claim found nothing since the last wake (o.gen ==
		// p.gen) would find nothing now either: r claims at once.
		if o.idle() && o.gen != p.gen && !sameInstance(o, r) && slices.ContainsFunc(o.req.Tasks, func(t string) bool { return slices.Contains(r.req.Tasks, t) }) {
			return true
		}
	}
	return false
}

// stop records that an executor instance stops, and removes and returns
// its parked request, if any: from now on none of its requests is held
// (park, putBack) or handed jobs at ingest (takeIdle).
func (p *parking) stop(app, instance string) *parkedRequest {
	p.stopping.mark(app, instance) // before the lock: a park after it sees it, one before is taken here
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, r := range p.reqs {
		if r.req.Executor == app && r.req.Instance == instance {
			p.reqs = append(p.reqs[:i], p.reqs[i+1:]...)
			return r
		}
	}
	return nil
}

// takeIdle removes and returns the oldest parked request that match
// accepts and that is idle for certain: no wake signal came since its
// claim found nothing, so no job it could run has become eligible since
// (on any coordinator: they all signal each other). Nil if none.
func (p *parking) takeIdle(match func(*parkedRequest) bool) *parkedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, freeSlot := range []bool{true, false} { // an executor that starts the jobs at once first
		for i, r := range p.reqs {
			if r.gen == p.gen && r.idle() == freeSlot && !p.stopping.has(r.req.Executor, r.req.Instance) && match(r) {
				p.reqs = append(p.reqs[:i], p.reqs[i+1:]...)
				return r
			}
		}
	}
	return nil
}

// putBack returns requests that are still waiting, ahead of newer ones.
// A wake signal that came while they were out (a request ingest took to
// hand jobs to, or one being served) is not lost: as in park, they are
// tried again at once. A request whose instance parked a newer one
// meanwhile, or said it stops, is not put back but returned, to be
// answered empty.
func (p *parking) putBack(reqs []*parkedRequest) (dropped []*parkedRequest) {
	if len(reqs) == 0 {
		return nil
	}
	p.mu.Lock()
	kept := reqs[:0:0]
	for _, r := range reqs {
		if p.stopping.has(r.req.Executor, r.req.Instance) || slices.ContainsFunc(p.reqs, func(newer *parkedRequest) bool { return sameInstance(newer, r) }) {
			dropped = append(dropped, r)
		} else {
			kept = append(kept, r)
		}
	}
	reqs = kept
	p.reqs = append(reqs, p.reqs...)
	missed := false
	for _, r := range reqs {
		missed = missed || r.gen != p.gen
	}
	p.mu.Unlock()
	if missed {
		p.signal()
	}
	return dropped
}

func (p *parking) nextDeadline() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var next time.Time
	for _, r := range p.reqs {
		if next.IsZero() || r.deadline.Before(next) {
			next = r.deadline
		}
	}
	return next, !next.IsZero()
}

// parkLoop serves the parked dispatch requests when work may be eligible,
// and answers them empty at their deadline.
func (d *dispatcher) parkLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := time.Hour
		if next, ok := d.parking.nextDeadline(); ok {
			wait = max(time.Until(next), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			for _, r := range d.parking.take() {
				d.respondDispatch(r.msg, events.DispatchReply{})
			}
			return
		case <-d.parking.parked:
		case <-d.parking.wake:
			d.serveParked(ctx, false)
		case <-timer.C:
			d.serveParked(ctx, true)
		}
	}
}

// serveParked claims jobs for the parked requests, oldest first. Requests
// that get none stay parked, unless their deadline has passed (expire).
func (d *dispatcher) serveParked(ctx context.Context, expire bool) {
	var keep []*parkedRequest
	now := time.Now()
	gen := d.parking.generation()
	for _, r := range d.parking.take() {
		if d.parking.stopping.has(r.req.Executor, r.req.Instance) {
			d.respondDispatch(r.msg, events.DispatchReply{}) // its instance said it stops meanwhile
			continue
		}
		jobs, err := d.claim(ctx, r.req, r.maxHeld)
		switch {
		case err != nil:
			d.respondDispatch(r.msg, events.DispatchReply{Error: d.replyError(r.msg.Subject, err)})
		case len(jobs) > 0 || (expire && !now.Before(r.deadline)) || ctx.Err() != nil:
			d.respondDispatch(r.msg, events.DispatchReply{Jobs: jobs})
		default:
			r.gen = gen // its claim found nothing after the signals counted so far
			keep = append(keep, r)
		}
	}
	for _, r := range d.parking.putBack(keep) {
		d.respondDispatch(r.msg, events.DispatchReply{})
	}
}
