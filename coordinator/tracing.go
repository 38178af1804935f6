package coordinator

import (
	"context"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the coordinator's spans.
const TracerName = "github.com/fairwayhq/fairway/coordinator"

// The names of the coordinator's spans (see docs/tracing.md). A job's
// trace is: the submitter's span, then SpanIngest (from the submit
// stream) or SpanSubmit (from the request/reply API), then one SpanClaim
// per attempt, each parent of the executor's "fairway.run <task>".
const (
	SpanIngest = "fairway.ingest"
	SpanSubmit = "fairway.submit"
	SpanClaim  = "fairway.claim"
	spanAPI    = "fairway.api " // + verb, for the other API verbs
)

// ingestSpan starts the span of one submission taken from the submit
// stream, as a child of the submitter's span when the message's headers
// carry one, and gives the submission its trace: the job's spans to come
// are this one's children. start is when the batch arrived.
func (in *ingest) ingestSpan(ctx context.Context, h nats.Header, sub *fairway.Submission, group, task string, start time.Time) trace.Span {
	ctx, span := in.tracer.Start(events.ExtractTrace(ctx, h), SpanIngest,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(start))
	if span.IsRecording() {
		span.SetAttributes(jobAttrs(sub.ID, group, task)...)
	}
	sub.TraceParent = events.TraceParent(ctx)
	return span
}

// apiSpan starts the span of one API request, as a child of the
// requester's span when the message's headers carry one: SpanSubmit for
// submit, "fairway.api <verb>" for the others.
func (c *Coordinator) apiSpan(ctx context.Context, h nats.Header, verb string) (context.Context, trace.Span) {
	name := SpanSubmit
	if _, known := apiVerbs[verb]; !known {
		name = strings.TrimSpace(spanAPI) // a name a client cannot vary
	} else if verb != events.VerbSubmit {
		name = spanAPI + verb
	}
	return c.tracer.Start(events.ExtractTrace(ctx, h), name, trace.WithSpanKind(trace.SpanKindServer))
}

// traceSubmission gives a submission from the API the trace of the
// request's span (see apiSpan), and names the job on that span.
func traceSubmission(ctx context.Context, sub *fairway.Submission) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(jobAttrs(sub.ID, sub.Group, sub.Task)...)
	}
	sub.TraceParent = events.TraceParent(ctx)
}

// jobAttrs names a job on a span. What a tenant sent is capped: the id
// of a rejected submission may be megabytes long.
func jobAttrs(id, group, task string) []attribute.KeyValue {
	return []attribute.KeyValue{
		events.AttrJobID.String(fairway.TruncateRunes(id, fairway.MaxIDLength)),
		events.AttrGroup.String(fairway.TruncateRunes(group, fairway.MaxNameLength)),
		events.AttrTask.String(fairway.TruncateRunes(task, fairway.MaxNameLength)),
	}
}

// endSpan ends span, with status error when err is set.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// traceClaim records the claim of jobs as one SpanClaim in each job's
// trace, from start (before the claim's transaction) to now, and hands
// each job out with that span as its trace context, so that the
// executor's run span is its child. A job stored without a trace gets a
// new one when this coordinator traces.
func (d *dispatcher) traceClaim(ctx context.Context, jobs []fairway.Job, executor string, start time.Time) {
	end := trace.WithTimestamp(time.Now())
	for i := range jobs {
		j := &jobs[i]
		sctx, span := d.tracer.Start(events.WithTraceParent(ctx, j.TraceParent), SpanClaim,
			trace.WithSpanKind(trace.SpanKindProducer), trace.WithTimestamp(start))
		if span.IsRecording() {
			span.SetAttributes(append(jobAttrs(j.ID, j.Group, j.Task),
				events.AttrAttempt.Int(j.Attempt), events.AttrExecutor.String(executor))...)
		}
		span.End(end)
		j.TraceParent = events.TraceParent(sctx)
	}
}
