package coordinator

import (
	"context"
	"strconv"

	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go/jetstream"
)

// deliveries is how often msg has been delivered (1 when unknown).
func deliveries(msg jetstream.Msg) uint64 {
	if meta, err := msg.Metadata(); err == nil {
		return meta.NumDelivered
	}
	return 1
}

// refused handles a message that PostgreSQL refuses on its own: it is
// tried again later until it has been delivered DeadLetterAfter times,
// then moved to the dead-letter stream (and before that, onDead runs, to
// tell the tenant, say). The rest of its batch is not held up by it.
func (c *Coordinator) refused(ctx context.Context, kind string, msg jetstream.Msg, reason string, onDead func()) {
	if n := deliveries(msg); n < uint64(c.cfg.DeadLetterAfter) {
		c.log.Warn("PostgreSQL refused a message; it is tried again, and dead-lettered after "+strconv.Itoa(c.cfg.DeadLetterAfter)+" deliveries",
			"kind", kind, "subject", msg.Subject(), "deliveries", n, "reason", reason)
		_ = msg.NakWithDelay(retryAfterOutage)
		return
	}
	if onDead != nil {
		onDead()
	}
	c.deadLetter(ctx, kind, msg, reason)
}

// deadLetter moves a message that can never be applied to the dead-letter
// stream, with its subject and the reason, and acknowledges it.
func (c *Coordinator) deadLetter(ctx context.Context, kind string, msg jetstream.Msg, reason string) {
	n := deliveries(msg)
	dm := events.DeadLetterMsg(c.subjects, kind, msg.Subject(), reason, n, msg.Data(), c.nc.MaxPayload())
	if _, err := c.js.PublishMsg(ctx, dm); err != nil {
		c.log.Error("moving a message to the dead-letter stream failed; it stays in JetStream", "kind", kind, "subject", msg.Subject(), "error", err)
		_ = msg.NakWithDelay(retryAfterOutage)
		return
	}
	_ = msg.Ack()
	c.metrics.deadLetters.WithLabelValues(kind).Inc()
	c.log.Warn("message moved to the dead-letter stream", "kind", kind, "subject", msg.Subject(), "deliveries", n,
		"size", len(msg.Data()), "reason", reason, "stream", c.subjects.DeadStream())
}
