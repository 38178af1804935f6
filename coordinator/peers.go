package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// peers notices that another coordinator is gone (SIGKILLed, cut off,
// or stopped): each says every peerBeat that it is alive, on a core NATS
// subject of the coordinators' own (events.Subjects.CoordinatorBeat), and
// one not heard for peerGone is gone. What it was handed and did not
// acknowledge (submissions, reports) is then handed out again by
// JetStream, after the ack wait, but only to a pull, and a group is
// pulled only when an announcement or a sweep rings it: gone sweeps the
// streams, where only the sweep every 10 s found them before. The
// coordinator that takes a dead one's lead sweeps already (sweepAfter);
// a coordinator that led nothing left its messages to the next sweep.
type peers struct {
	nc      *nats.Conn
	subject string
	holder  string // this coordinator's name, as in the leases
	// gone is called, at most once a check, when a peer was found gone.
	gone func()

	mu   sync.Mutex
	seen map[string]time.Time // by holder, when last heard
}

const (
	// peerBeat is how often a coordinator says it is alive; peerGone how
	// long one not heard is taken for gone (a beat may be late a
	// little: a loaded machine, a reconnect).
	peerBeat = time.Second
	peerGone = 3 * time.Second
)

// start listens to the others and says, every peerBeat, that this one is
// alive, until ctx ends.
func (p *peers) start(ctx context.Context, subs *subscriptions, goLoop func(context.Context, func(context.Context))) error {
	p.seen = map[string]time.Time{}
	if err := subs.listen(p.subject, p.heard); err != nil {
		return err
	}
	goLoop(ctx, func(ctx context.Context) {
		t := time.NewTicker(peerBeat)
		defer t.Stop()
		for {
			_ = p.nc.Publish(p.subject, []byte(p.holder)) // a beat lost: the next one
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if p.check(now) {
					p.gone()
				}
			}
		}
	})
	return nil
}

// heard takes note of a peer's beat.
func (p *peers) heard(msg *nats.Msg) {
	holder := string(msg.Data)
	if holder == p.holder || holder == "" || len(holder) > 200 {
		return
	}
	p.mu.Lock()
	p.seen[holder] = time.Now()
	p.mu.Unlock()
}

// check forgets the peers not heard since peerGone before now and says
// whether there were any.
func (p *peers) check(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	gone := false
	for holder, at := range p.seen {
		if now.Sub(at) > peerGone {
			delete(p.seen, holder)
			gone = true
		}
	}
	return gone
}

// alive says whether holder was heard within the last beat and a half
// (a live coordinator beats every peerBeat).
func (p *peers) alive(holder string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.seen[holder]
	return ok && time.Since(at) < 3*peerBeat/2
}
