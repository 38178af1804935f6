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

// subscribe adds a queue subscription shared by all coordinators.
func (s *subscriptions) subscribe(subject string, handle nats.MsgHandler) error {
	sub, err := s.nc.QueueSubscribe(subject, queueGroup, handle)
	if err != nil {
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
	goLoop  func(context.Context, func(context.Context))
	running []jetstream.ConsumeContext
	// stoppers end the fetches of sources that are not a ConsumeContext
	// (submitSources.stop): each returns once its fetches have ended.
	stoppers []func()
}

const (
	// ackWait is how long a message handed to a coordinator waits for its
	// ack before JetStream hands it to another (JetStream's default is
	// 30 s).
	ackWait = 10 * time.Second
	// pullMaxBytes is a pull's bytes, at least (two max_payloads if
	// larger).
	pullMaxBytes = 16 << 20
)

// consume creates (or updates) the durable consumer name on stream, with
// at most window messages unacknowledged, and consumes it: each message
// goes to deliver, on the consumer's callback, and loop runs on a
// goroutine of its own until its ctx ends, to handle in batches of up to
// size what deliver queued. deliver may block: that holds the consumer's
// pulls back.
func (cs *consumers) consume(ctx context.Context, stream, name string, size, window int,
	deliver func(jetstream.Msg), loop func(context.Context)) error {
	cons, err := cs.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:     name,
		Description: "Fairway coordinators",
		AckPolicy:   jetstream.AckExplicitPolicy,
		// A coordinator that dies holding messages leaves them to the
		// others after this long; a batch is stored well within it.
		AckWait:       ackWait,
		MaxAckPending: window,
	})
	if err != nil {
		return fmt.Errorf("creating consumer %s on stream %s: %w", name, stream, err)
	}
	// Pulls are bounded in bytes as well as messages, so that large
	// messages cannot make a pull buffer hold gigabytes.
	pull := jetstream.PullMaxMessagesWithBytesLimit(2*size, max(pullMaxBytes, 2*int(cs.nc.MaxPayload())))
	cc, err := cons.Consume(deliver, pull)
	if err != nil {
		return fmt.Errorf("consuming %s: %w", stream, err)
	}
	cs.running = append(cs.running, cc)
	cs.goLoop(ctx, loop)
	return nil
}

// consumeInOrder runs handle on batches of messages from the durable
// consumer name on stream (see consume), in the stream's order. A batch
// is whatever has arrived, up to size: the first message is waited for,
// the rest are taken as they are.
func (cs *consumers) consumeInOrder(ctx context.Context, stream, name string, size, window int,
	handle func(context.Context, []jetstream.Msg)) error {
	msgs := make(chan jetstream.Msg, 2*size)
	return cs.consume(ctx, stream, name, size, window, func(msg jetstream.Msg) { msgs <- msg }, func(ctx context.Context) {
		batch := make([]jetstream.Msg, 0, size)
		for {
			select {
			case <-ctx.Done():
				return
			case msg := <-msgs:
				batch = append(batch[:0], msg)
			}
		fill:
			for len(batch) < size {
				select {
				case msg := <-msgs:
					batch = append(batch, msg)
				default:
					break fill
				}
			}
			handle(ctx, batch)
		}
	})
}

// drain stops every consumer's pulls, waits until each has closed (the
// messages pulled already have been delivered), and forgets them. The
// loops go on handling what was delivered until their ctx ends.
func (cs *consumers) drain() {
	for _, stop := range cs.stoppers {
		stop()
	}
	cs.stoppers = nil
	for _, cc := range cs.running {
		cc.Drain()
	}
	for _, cc := range cs.running {
		<-cc.Closed()
	}
	cs.running = nil
}
