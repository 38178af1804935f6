package coordinator

import (
	"log/slog"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
)

// serviceBase is what every service of a coordinator is built on, as
// River's services on its baseservice.Archetype: the store, the logger,
// the metrics, the tracer, and the NATS connection, JetStream and subjects.
// Each service embeds it, New makes one for all, and a service's
// constructor takes it beside its own Config and the follow-ups that are
// its own (what it kicks or tells when it changed something).
type serviceBase struct {
	store    *store.Store
	log      *slog.Logger
	metrics  *coordMetrics
	tracer   trace.Tracer
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects events.Subjects
}
