package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of relayConfig.
const (
	outboxPollInterval = time.Second // fallback when no change kicked the publisher
	outboxBatch        = 1000
	// outboxAckTimeout bounds the wait for JetStream's acks of one
	// publishing round.
	outboxAckTimeout = 10 * time.Second
)

// relayConfig configures the events relay.
type relayConfig struct {
	// PollInterval is how often the relay reads the outbox when no change
	// kicked it. Defaults to outboxPollInterval.
	PollInterval time.Duration
	// Batch caps the events read from the outbox in one round. Defaults to
	// outboxBatch.
	Batch int
	// AckTimeout bounds the wait for the acks of one round's messages.
	// Defaults to outboxAckTimeout.
	AckTimeout time.Duration
	// PerMessage publishes each event in a message of its own
	// (Config.EventPerMessage).
	PerMessage bool
}

func (c relayConfig) withDefaults() relayConfig {
	if c.PollInterval <= 0 {
		c.PollInterval = outboxPollInterval
	}
	if c.Batch <= 0 {
		c.Batch = outboxBatch
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = outboxAckTimeout
	}
	return c
}

// relay is the events relay: it moves the events that state changes wrote
// to the PostgreSQL outbox, in the same transaction as the change, to
// JetStream, and deletes them once JetStream has them. Every coordinator
// runs one; one at a time across the coordinators publishes (an advisory
// lock in store.PublishEvents keeps the events in commit order), the
// others find nothing to do. It reads when kicked (a change committed) and
// every PollInterval otherwise.
type relay struct {
	cfg relayConfig
	serviceBase
	letters *deadLetters // where a message JetStream refuses goes
	kicks   chan struct{}
}

func newRelay(cfg relayConfig, b serviceBase, dead *deadLetters) *relay {
	return &relay{
		cfg: cfg.withDefaults(), serviceBase: b, letters: dead,
		kicks: make(chan struct{}, 1),
	}
}

// kick makes the relay read the outbox now: a change committed. It never
// blocks; kicks that come while one waits are one.
func (r *relay) kick() {
	select {
	case r.kicks <- struct{}{}:
	default:
	}
}

// run moves events from the PostgreSQL outbox to JetStream until ctx ends.
func (r *relay) run(ctx context.Context) {
	ticker := time.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kicks:
		case <-ticker.C:
		}
		for {
			n, err := r.store.PublishEvents(ctx, r.cfg.Batch, func(evs []store.Event) error { return r.publish(ctx, evs) })
			if err != nil {
				if ctx.Err() == nil {
					r.log.Warn("publishing events; will retry", "error", err)
				}
				break
			}
			if n < r.cfg.Batch {
				break
			}
		}
	}
}

// publish publishes asynchronously and waits for every ack. By default
// events go in batches (see batchEvents): one message per subject and
// level, a JSON array; with Config.EventPerMessage one message per event.
// Each message carries a Nats-Msg-Id made of its events' ids, so a retry
// after a partial failure does not duplicate within JetStream's window.
//
// What a tenant or an executor sent is capped in an event (ids, names and
// error text, see capEvent), so an event is a few KiB at most. A message
// that JetStream still refuses (larger than max_payload or the stream's
// message size, say) must not wedge the outbox for every tenant: it goes
// to the dead-letter stream, with a warning, and counts as published.
func (r *relay) publish(ctx context.Context, evs []store.Event) error {
	msgs, members, err := r.messages(evs)
	if err != nil {
		return err
	}
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, msg := range msgs {
		f, err := r.js.PublishMsgAsync(msg)
		if errors.Is(err, nats.ErrMaxPayload) {
			r.dead(ctx, evs, members[i], msg, err)
			continue
		}
		if err != nil {
			return fmt.Errorf("publishing events on %s: %w", msg.Subject, err)
		}
		futures[i] = f
	}
	timeout := time.NewTimer(r.cfg.AckTimeout)
	defer timeout.Stop()
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) {
				// JetStream refused this message: it would refuse it again.
				r.dead(ctx, evs, members[i], msgs[i], err)
				continue
			}
			return fmt.Errorf("publishing events: %w", err)
		case <-timeout.C:
			return fmt.Errorf("publishing %d events in %d messages: no ack from JetStream within %s", len(evs), len(msgs), r.cfg.AckTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.metrics.published(evs)
	return nil
}

// messages encodes outbox events as messages, and returns with each the
// indexes of its events.
func (r *relay) messages(evs []store.Event) ([]*nats.Msg, [][]int, error) {
	subject := func(e store.Event) string { return r.subjects.Event(e.Group, e.Task, e.State) }
	if r.cfg.PerMessage {
		msgs := make([]*nats.Msg, len(evs))
		members := make([][]int, len(evs))
		for i, e := range evs {
			data, err := encodeEvent(e)
			if err != nil {
				return nil, nil, err
			}
			msgs[i] = &nats.Msg{Subject: subject(e), Data: data, Header: nats.Header{jetstream.MsgIDHeader: {e.ID}}}
			members[i] = []int{i}
		}
		return msgs, members, nil
	}
	batches, err := batchEvents(evs, subject, appendEvent)
	if err != nil {
		return nil, nil, err
	}
	msgs := make([]*nats.Msg, len(batches))
	members := make([][]int, len(batches))
	for i, b := range batches {
		msgs[i] = &nats.Msg{Subject: b.subject, Data: b.data, Header: nats.Header{jetstream.MsgIDHeader: {b.id(evs)}}}
		members[i] = b.events
	}
	return msgs, members, nil
}

// dead moves a message of events JetStream refuses to the dead-letter
// stream. Should that fail too, the events are dropped: the outbox must
// flow.
func (r *relay) dead(ctx context.Context, evs []store.Event, members []int, msg *nats.Msg, cause error) {
	err := r.letters.publish(ctx, events.DeadEvent, msg.Subject, "JetStream refused the event: "+cause.Error(), 1, msg.Data, len(msg.Data))
	first := evs[members[0]]
	r.log.Warn("a message of events JetStream refuses was moved to the dead-letter stream and removed from the outbox",
		"event_id", first.ID, "events", len(members), "job_id", fairway.TruncateRunes(first.JobID, fairway.MaxIDLength), "subject", msg.Subject, "size", len(msg.Data),
		"error", cause, "dead_letter_error", err)
}
