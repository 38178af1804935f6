package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// relayHarness is a relay on its own PostgreSQL and NATS server, with the
// streams created, not started.
type relayHarness struct {
	reg      *prometheus.Registry
	st       *store.Store
	js       jetstream.JetStream
	subjects events.Subjects
	relay    *relay
}

func newRelayHarness(t *testing.T, cfg relayConfig) *relayHarness {
	t.Helper()
	w := newStreamWorld(t)
	reg := prometheus.NewRegistry()
	metrics := newMetrics(reg, w.st, w.log)
	return &relayHarness{reg: reg, st: w.st, js: w.js, subjects: w.subjects,
		relay: newRelay(cfg, w.base(metrics), w.deadLetters(metrics))}
}

// counter is the value of the counter name with the label label=value.
func (h *relayHarness) counter(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := h.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// outboxEmpty says whether the outbox holds no event (a read that finds
// one fails, so that it stays).
func (h *relayHarness) outboxEmpty(t *testing.T) bool {
	n, err := h.st.PublishEvents(t.Context(), 1, func([]store.Event) error { return context.Canceled })
	return err == nil && n == 0
}

// rejectIDs writes the rejected events of submissions of ids to the
// outbox (group g, task t), as ingest does.
func rejectIDs(t *testing.T, st *store.Store, ids ...string) {
	t.Helper()
	var rs []store.Rejection
	for _, id := range ids {
		rs = append(rs, store.Rejection{JobID: id, Group: "g", Task: "t", Err: fairway.Invalid("args", "not an object")})
	}
	require.NoError(t, st.Reject(t.Context(), rs))
}

// TestRelayPublishesTheOutbox runs the events relay alone: kicked, it
// publishes the events in the outbox (three rejections) in one message
// of the three, or with PerMessage in one message each, counts them, and
// empties the outbox.
func TestRelayPublishesTheOutbox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		perMessage bool
		messages   int
		first      byte
	}{{"batched", false, 1, '['}, {"per message", true, 3, '{'}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// An hour between polls: only the kick makes it publish in time.
			h := newRelayHarness(t, relayConfig{PollInterval: time.Hour, PerMessage: tc.perMessage})
			require.Equal(t, outboxBatch, h.relay.cfg.Batch)
			rejectIDs(t, h.st, "j1", "j2", "j3")
			runService(t, h.relay.run)
			h.relay.kick()

			var ids []string
			for _, msg := range readStream(t, h.js, h.subjects.EventStream(), tc.messages) {
				require.Equal(t, h.subjects.Event("g", "t", fairway.StateRejected), msg.Subject())
				require.Equal(t, tc.first, msg.Data()[0], "%s", msg.Data())
				evs, err := events.DecodeEvents(msg.Data())
				require.NoError(t, err)
				for _, ev := range evs {
					ids = append(ids, ev.JobID)
				}
			}
			require.Equal(t, []string{"j1", "j2", "j3"}, ids, "every event once, in order")
			require.Eventually(t, func() bool { return h.outboxEmpty(t) }, serviceWait, 10*time.Millisecond)
			require.Equal(t, 3.0, h.counter(t, "fairway_events_total", "state", string(fairway.StateRejected)))
		})
	}
}

// TestRelayDeadLettersWhatJetStreamRefuses: a message of events that the
// events stream refuses (here: larger than its message size) goes to the
// dead-letter stream, counted there, and leaves the outbox, which must
// flow.
func TestRelayDeadLettersWhatJetStreamRefuses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := newRelayHarness(t, relayConfig{PollInterval: time.Hour})
	stream, err := h.js.Stream(ctx, h.subjects.EventStream())
	require.NoError(t, err)
	cfg := stream.CachedInfo().Config
	cfg.MaxMsgSize = 64
	_, err = h.js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
	rejectIDs(t, h.st, "j1")
	runService(t, h.relay.run)
	h.relay.kick()

	dead := readStream(t, h.js, h.subjects.DeadStream(), 1)[0]
	require.Equal(t, h.subjects.Dead(events.DeadEvent), dead.Subject())
	require.Equal(t, h.subjects.Event("g", "t", fairway.StateRejected), dead.Headers().Get(events.HeaderDeadSubject))
	require.Contains(t, dead.Headers().Get(events.HeaderDeadReason), "JetStream refused the event")
	require.Eventually(t, func() bool { return h.outboxEmpty(t) }, serviceWait, 10*time.Millisecond)
	require.Equal(t, 1.0, h.counter(t, "fairway_dead_letters_total", "kind", events.DeadEvent))
}
