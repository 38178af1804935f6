package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// What Stop drains before the services' goroutines end: the NATS
// subscriptions (the API's, the executor protocol's and the notifications
// between coordinators) and the JetStream consumers (ingest's and the
// results'). The services add theirs when they start, through these two
// holders, so that none of them needs the Coordinator, and Stop keeps its
// order: every subscription drained, then every consumer, then the wait
// for the consumers to close, and only then the goroutines cancelled and
// waited for.

// subscriptions are a coordinator's NATS subscriptions.
type subscriptions struct {
	nc   *nats.Conn
	subs []*nats.Subscription
}

// subPendingBytes bounds the bytes a subscription holds before its
// callback takes them (nats.go's default is 64 MiB): beyond, NATS drops the
// subscription's messages (a slow consumer), which its requesters see as
// a timeout. The callbacks only queue or refuse a request.
const subPendingBytes = 16 << 20

// subscribe adds a queue subscription shared by all coordinators.
func (s *subscriptions) subscribe(subject string, handle nats.MsgHandler) error {
	sub, err := s.nc.QueueSubscribe(subject, queueGroup, handle)
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	if err := sub.SetPendingLimits(nats.DefaultSubPendingMsgsLimit, subPendingBytes); err != nil {
		return fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	s.subs = append(s.subs, sub)
	return nil
}

// listen adds a subscription of this coordinator's own: it hears every
// message on subject, whatever the other coordinators hear.
func (s *subscriptions) listen(subject string, handle nats.MsgHandler) error {
	sub, err := s.nc.Subscribe(subject, handle)
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	s.subs = append(s.subs, sub)
	return nil
}

// drain drains every subscription (it returns at once: the messages in
// hand are still handled) and forgets them.
func (s *subscriptions) drain() {
	for _, sub := range s.subs {
		_ = sub.Drain()
	}
	s.subs = nil
}

// consumers are a coordinator's JetStream consumers: each a durable
// consumer shared by all coordinators, whose messages a goroutine of the
// coordinator handles in batches.
type consumers struct {
	js jetstream.JetStream
	nc *nats.Conn // its max_payload bounds a pull's bytes
	// goLoop runs a loop on a goroutine of the coordinator, which Stop
	// cancels and waits for once the consumers have closed
	// (Coordinator.goLoop).
	goLoop func(context.Context, func(context.Context))
	// stoppers end the sources' fetches (streamSources.stop): each
	// returns once its fetches have ended.
	stoppers []func()
}

const (
	// ackWait is how long a message handed to a coordinator waits for its
	// ack before JetStream hands it to another (JetStream's default is
	// 30 s): what a coordinator that died was handed comes back then. One
	// that holds a message longer says it still works on it
	// (streamSources.keepAlive), so the ack wait bounds how long a death
	// holds messages back, not how long a batch may take (before, 10 s:
	// the reports a SIGKILLed leader had fetched were applied 11.7 s after
	// its death).
	ackWait = 3 * time.Second
	// pullMaxBytes is a pull's bytes, at least (two max_payloads if
	// larger).
	pullMaxBytes = 16 << 20
)

// drain ends every source's fetches and waits until each has ended (the
// messages fetched already are in the inboxes). The loops go on handling
// what was fetched until their ctx ends.
func (cs *consumers) drain() {
	for _, stop := range cs.stoppers {
		stop()
	}
	cs.stoppers = nil
}
