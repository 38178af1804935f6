package executor

import (
	"context"

	"github.com/fairwayhq/fairway/events"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the executor's spans.
const TracerName = "github.com/fairwayhq/fairway/executor"

// SpanRun starts the name of the span around a handler: "fairway.run
// <task>".
const SpanRun = "fairway.run "

// runSpan starts the span of one run of a job's handler, as a child of
// the job's trace context (the claim that handed it out), and returns the
// handler's context carrying it: task code starts its own spans under it.
func (e *Executor) runSpan(ctx context.Context, job *Job) (context.Context, trace.Span) {
	ctx, span := e.tracer.Start(events.WithTraceParent(ctx, job.TraceParent), SpanRun+job.Task,
		trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(events.AttrJobID.String(job.ID), events.AttrGroup.String(job.Group),
			events.AttrTask.String(job.Task), events.AttrAttempt.Int(job.Attempt), events.AttrExecutor.String(e.cfg.AppID))
	}
	return ctx, span
}

// endRunSpan ends a run span with the job's outcome: status error when
// the handler failed or panicked; a cancelled or released run is no
// error.
func endRunSpan(span trace.Span, out outcome) {
	if span.IsRecording() {
		span.SetAttributes(events.AttrOutcome.String(string(out.kind)))
		if out.kind == events.OutcomeError || out.kind == events.OutcomePermanent {
			span.SetStatus(codes.Error, out.err)
		}
	}
	span.End()
}
