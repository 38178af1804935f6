package events

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TraceParentHeader is the NATS header that carries a message's trace
// context, as W3C Trace Context spells it (with TraceStateHeader beside
// it). Submissions, API requests and lifecycle events carry it when their
// sender had a span; a job stores it and its dispatch carries it on, so
// that one job is one trace (see docs/tracing.md).
const (
	TraceParentHeader = "traceparent"
	TraceStateHeader  = "tracestate"
)

// The attributes of Fairway's spans: the job's, on every span of its
// trace, and the executor's app-id on the claim and run spans.
const (
	AttrJobID    = attribute.Key("fairway.job.id")
	AttrGroup    = attribute.Key("fairway.job.group")
	AttrTask     = attribute.Key("fairway.job.task")
	AttrAttempt  = attribute.Key("fairway.job.attempt")
	AttrOutcome  = attribute.Key("fairway.job.outcome")
	AttrExecutor = attribute.Key("fairway.executor")
)

// traceContext is the propagator Fairway uses on the wire: W3C Trace
// Context, whatever the program set as otel's global propagator (which is
// a no-op unless set), since Fairway's own hops must carry it to work.
var traceContext propagation.TraceContext

// HeaderCarrier adapts NATS message headers to otel's TextMapCarrier, for
// propagators of one's own (baggage, say): nats.Header is a
// map[string][]string whose keys are case-sensitive.
type HeaderCarrier nats.Header

// Get returns the first value of key.
func (h HeaderCarrier) Get(key string) string { return nats.Header(h).Get(key) }

// Set replaces the values of key with value.
func (h HeaderCarrier) Set(key, value string) { nats.Header(h).Set(key, value) }

// Keys lists the keys present.
func (h HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// InjectTrace writes the span context of ctx into msg's headers. It does
// nothing, and allocates no headers, when ctx has no valid span context.
func InjectTrace(ctx context.Context, msg *nats.Msg) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	traceContext.Inject(ctx, HeaderCarrier(msg.Header))
}

// ExtractTrace returns ctx carrying the remote span context that h holds,
// or ctx as it is when h holds none (or an invalid one).
func ExtractTrace(ctx context.Context, h nats.Header) context.Context {
	if h.Get(TraceParentHeader) == "" {
		return ctx
	}
	return traceContext.Extract(ctx, HeaderCarrier(h))
}

// TraceParent returns the W3C traceparent of the span context of ctx, the
// form in which a job stores its trace, or "" when ctx has no valid one.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	return carrier[TraceParentHeader]
}

// WithTraceParent returns ctx carrying the remote span context of a
// traceparent (as TraceParent gives it), or ctx as it is for "" or one
// that does not parse.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{TraceParentHeader: traceparent})
}
