package events_test

import (
	"context"
	"testing"

	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

func spanContext(t *testing.T) trace.SpanContext {
	t.Helper()
	tid, err := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	require.NoError(t, err)
	sid, err := trace.SpanIDFromHex("00f067aa0ba902b7")
	require.NoError(t, err)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
}

// TestTraceContextInHeaders: a span context goes into a NATS message's
// headers as W3C traceparent and comes out the same, remote; a context
// without one adds no headers.
func TestTraceContextInHeaders(t *testing.T) {
	sc := spanContext(t)
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	msg := nats.NewMsg("s")
	events.InjectTrace(ctx, msg)
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", msg.Header.Get(events.TraceParentHeader))
	got := trace.SpanContextFromContext(events.ExtractTrace(context.Background(), msg.Header))
	require.True(t, got.IsRemote())
	require.True(t, got.Equal(sc.WithRemote(true)))

	bare := &nats.Msg{Subject: "s"}
	events.InjectTrace(context.Background(), bare)
	require.Nil(t, bare.Header, "no span, no headers")
	require.False(t, trace.SpanContextFromContext(events.ExtractTrace(context.Background(), nil)).IsValid())
	require.False(t, trace.SpanContextFromContext(events.ExtractTrace(context.Background(), nats.Header{events.TraceParentHeader: {"garbage"}})).IsValid())
}

// TestTraceParentRoundTrip: the stored form of a trace context.
func TestTraceParentRoundTrip(t *testing.T) {
	sc := spanContext(t)
	tp := events.TraceParent(trace.ContextWithSpanContext(context.Background(), sc))
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tp)
	require.True(t, trace.SpanContextFromContext(events.WithTraceParent(context.Background(), tp)).Equal(sc.WithRemote(true)))
	require.Equal(t, "", events.TraceParent(context.Background()))
	ctx := context.Background()
	require.Equal(t, ctx, events.WithTraceParent(ctx, ""))
	require.False(t, trace.SpanContextFromContext(events.WithTraceParent(ctx, "00-zz")).IsValid())
}
