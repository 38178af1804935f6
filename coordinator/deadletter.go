package coordinator

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// retryAfterOutage is how long a message waits in JetStream before it is
// tried again when PostgreSQL is unavailable.
const retryAfterOutage = 2 * time.Second

// deadLetters decides what becomes of a consumed message that is not
// applied: it stays in JetStream for a later try (retryLater, refused),
// or it goes to the dead-letter stream (move). Ingest and the results
// service share it.
type deadLetters struct {
	// after is how many deliveries a message that PostgreSQL refuses gets
	// before it goes to the dead-letter stream (Config.DeadLetterAfter).
	after    int
	subjects events.Subjects
	nc       *nats.Conn
	js       jetstream.JetStream
	log      *slog.Logger
	metrics  *coordMetrics
	// retryLog bounds the lines of retryLater: while a database is down,
	// every batch of its messages fails (hundreds a second under load).
	// Nil: every line.
	retryLog *logLimit
}

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
func (d *deadLetters) refused(ctx context.Context, kind string, msg jetstream.Msg, reason string, onDead func()) {
	if n := deliveries(msg); d.after < 0 || n < uint64(d.after) {
		d.log.Warn("PostgreSQL refused a message; it is tried again, and dead-lettered after "+strconv.Itoa(d.after)+" deliveries",
			"kind", kind, "subject", msg.Subject(), "deliveries", n, "reason", reason)
		_ = msg.NakWithDelay(retryAfterOutage)
		return
	}
	if onDead != nil {
		onDead()
	}
	d.move(ctx, kind, msg, reason)
}

// move moves a message that can never be applied to the dead-letter
// stream, with its subject and the reason, and acknowledges it.
func (d *deadLetters) move(ctx context.Context, kind string, msg jetstream.Msg, reason string) {
	d.moveKept(ctx, kind, msg, len(msg.Data()), reason)
}

// moveKept is move keeping at most kept bytes of the body: a message too
// large to keep whole (the dead letter's size header says how large it
// was).
func (d *deadLetters) moveKept(ctx context.Context, kind string, msg jetstream.Msg, kept int, reason string) {
	n := deliveries(msg)
	if err := d.publish(ctx, kind, msg.Subject(), reason, n, msg.Data(), kept); err != nil {
		d.log.Error("moving a message to the dead-letter stream failed; it stays in JetStream", "kind", kind, "subject", msg.Subject(), "error", err)
		_ = msg.NakWithDelay(retryAfterOutage)
		return
	}
	_ = msg.Ack()
	d.log.Warn("message moved to the dead-letter stream", "kind", kind, "subject", msg.Subject(), "deliveries", n,
		"size", len(msg.Data()), "kept", min(len(msg.Data()), kept), "reason", reason, "stream", d.subjects.DeadStream())
}

// publish stores a message (its subject, at most kept bytes of its body,
// its size and the deliveries it had) in the dead-letter stream, with the
// reason, and counts it.
func (d *deadLetters) publish(ctx context.Context, kind, subject, reason string, deliveries uint64, data []byte, kept int) error {
	dm := events.DeadLetterMsg(d.subjects, kind, subject, reason, deliveries, data, d.nc.MaxPayload())
	dm.Data = dm.Data[:min(len(dm.Data), kept)]
	if _, err := d.js.PublishMsg(ctx, dm); err != nil {
		return err
	}
	d.metrics.deadLetters.WithLabelValues(kind).Inc()
	return nil
}

// retryLater leaves messages in JetStream for a later try, when PostgreSQL
// is unavailable or the coordinator is stopping.
func (d *deadLetters) retryLater(ctx context.Context, msgs []jetstream.Msg, err error) {
	if ctx.Err() == nil && (d.retryLog == nil || d.retryLog.allow(d.log, "storing in PostgreSQL failed")) {
		d.log.Error("storing in PostgreSQL failed; the messages stay in JetStream and are retried", "error", err, "messages", len(msgs))
	}
	for _, msg := range msgs {
		_ = msg.NakWithDelay(retryAfterOutage)
	}
}
