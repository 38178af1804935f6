package coordinator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// spanFeed is an in-memory span processor (a tracetest.SpanRecorder)
// that also hands each ended span to a channel, so that a test awaits
// spans instead of polling for them.
type spanFeed struct {
	*tracetest.SpanRecorder
	ended chan sdktrace.ReadOnlySpan
}

func (f spanFeed) OnEnd(s sdktrace.ReadOnlySpan) {
	f.SpanRecorder.OnEnd(s)
	f.ended <- s
}

// await collects ended spans of trace id until want says it has them
// all, within waitTimeout.
func (f spanFeed) await(t *testing.T, id trace.TraceID, want func([]sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	timeout := time.After(waitTimeout)
	for !want(got) {
		select {
		case s := <-f.ended:
			if s.SpanContext().TraceID() == id {
				got = append(got, s)
			}
		case <-timeout:
			t.Fatalf("spans of trace %s not all ended within %s; got %s", id, waitTimeout, spanNames(got))
		}
	}
	return got
}

// traceHarness is a coordinator and an executor on a real PostgreSQL and
// NATS, each with the tracer provider given (nil: the global, a no-op),
// a client, and the events of every job.
type traceHarness struct {
	*harness
	feed spanFeed
	tp   *sdktrace.TracerProvider
}

// handlers are the tasks of traceSetup's executor.
func traceSetup(t *testing.T, coordTracer, execTracer func(*sdktrace.TracerProvider) trace.TracerProvider, handlers map[string]executor.Handler) *traceHarness {
	t.Helper()
	ctx := t.Context()
	feed := spanFeed{SpanRecorder: tracetest.NewSpanRecorder(), ended: make(chan sdktrace.ReadOnlySpan, 1000)}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(feed))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	retries := 1
	h, _ := setupWith(t, coordinator.Config{RetryDelay: 10 * time.Millisecond, Retries: &retries, Tracer: coordTracer(tp)})
	ex := h.newExecutor(executor.Config{AppID: "traced", PoolSize: 2, Tracer: execTracer(tp)})
	for task, handler := range handlers {
		ex.Handle(task, handler)
	}
	require.NoError(t, ex.Start(ctx))
	return &traceHarness{harness: h, feed: feed, tp: tp}
}

func sdkTracer(tp *sdktrace.TracerProvider) trace.TracerProvider { return tp }
func noTracer(*sdktrace.TracerProvider) trace.TracerProvider     { return noop.NewTracerProvider() }

// tracedTask starts a span of its own from the handler's context, as task
// code would, and fails its first attempt when the args ask for it.
func tracedTask(ctx context.Context, job *executor.Job) error {
	_, span := trace.SpanFromContext(ctx).TracerProvider().Tracer("task").Start(ctx, "task work")
	defer span.End()
	if string(job.Args) == `{"fail_first":true}` && job.Attempt == 1 {
		return errors.New("first attempt fails")
	}
	return nil
}

// TestTraceOfOneJob: a job submitted under a span is one trace, through
// either submit path: the submitter's span, then the coordinator's
// fairway.ingest (stream) or fairway.submit (request/reply), then
// fairway.claim, then the executor's fairway.run <task>, whose context
// the handler's own span is a child of.
func TestTraceOfOneJob(t *testing.T) {
	t.Parallel()
	h := traceSetup(t, sdkTracer, sdkTracer, map[string]executor.Handler{"traced": tracedTask})
	for _, tc := range []struct {
		path   string
		stored string // the coordinator's span that stored the job
		submit func(context.Context, fairway.Submission) (string, error)
	}{
		{"stream", coordinator.SpanIngest, h.client.Submit},
		{"request/reply", coordinator.SpanSubmit, func(ctx context.Context, sub fairway.Submission) (string, error) {
			job, err := h.client.SubmitWait(ctx, sub)
			if err != nil {
				return "", err
			}
			return job.ID, nil
		}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			ctx, parent := h.tp.Tracer("test").Start(t.Context(), "submitter")
			id, err := tc.submit(ctx, fairway.Submission{Group: "acme", Task: "traced"})
			require.NoError(t, err)
			parent.End()
			evs := h.final(id)
			require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State)

			tid := parent.SpanContext().TraceID()
			spans := h.feed.await(t, tid, hasSpans("submitter", tc.stored, coordinator.SpanClaim, executor.SpanRun+"traced", "task work"))
			require.Len(t, spans, 5, "one trace: %s", spanNames(spans))
			stored := only(t, spans, tc.stored)
			claim := only(t, spans, coordinator.SpanClaim)
			run := only(t, spans, executor.SpanRun+"traced")
			require.Equal(t, parent.SpanContext().SpanID(), stored.Parent().SpanID(), "%s is the submitter's child", tc.stored)
			require.True(t, stored.Parent().IsRemote(), "the submitter's span came in NATS headers")
			require.Equal(t, stored.SpanContext().SpanID(), claim.Parent().SpanID(), "the claim is a child of %s", tc.stored)
			require.Equal(t, claim.SpanContext().SpanID(), run.Parent().SpanID(), "the run is a child of the claim")
			require.Equal(t, run.SpanContext().SpanID(), only(t, spans, "task work").Parent().SpanID(), "the handler's context carries the run span")
			for _, s := range []sdktrace.ReadOnlySpan{stored, claim, run} {
				require.Contains(t, s.Attributes(), events.AttrJobID.String(id), s.Name())
				require.Contains(t, s.Attributes(), events.AttrGroup.String("acme"), s.Name())
				require.Contains(t, s.Attributes(), events.AttrTask.String("traced"), s.Name())
			}
			for _, s := range []sdktrace.ReadOnlySpan{claim, run} {
				require.Contains(t, s.Attributes(), events.AttrAttempt.Int(1), s.Name())
				require.Contains(t, s.Attributes(), events.AttrExecutor.String("traced"), s.Name())
			}
			require.Contains(t, run.Attributes(), events.AttrOutcome.String("success"))

			// The job keeps its trace: the span that stored it.
			job, err := h.client.Get(t.Context(), "acme", id)
			require.NoError(t, err)
			require.Equal(t, events.TraceParent(trace.ContextWithSpanContext(t.Context(), stored.SpanContext())), job.TraceParent)
		})
	}
}

// TestTraceOfARetriedJob: a retry stays in the job's trace: two claims,
// each a child of the span that stored the job, each the parent of its
// run; the failed run has status error.
func TestTraceOfARetriedJob(t *testing.T) {
	t.Parallel()
	h := traceSetup(t, sdkTracer, sdkTracer, map[string]executor.Handler{"traced": tracedTask})
	ctx, parent := h.tp.Tracer("test").Start(t.Context(), "submitter")
	id, err := h.client.Submit(ctx, fairway.Submission{Group: "acme", Task: "traced", Args: []byte(`{"fail_first":true}`)})
	require.NoError(t, err)
	parent.End()
	evs := h.final(id)
	require.Equal(t, fairway.StateSuccess, evs[len(evs)-1].State, transitions(evs))

	spans := h.feed.await(t, parent.SpanContext().TraceID(), func(got []sdktrace.ReadOnlySpan) bool {
		return len(named(got, executor.SpanRun+"traced")) == 2 && len(named(got, coordinator.SpanClaim)) == 2 && hasSpans(coordinator.SpanIngest)(got)
	})
	ingest := only(t, spans, coordinator.SpanIngest)
	claims, runs := named(spans, coordinator.SpanClaim), named(spans, executor.SpanRun+"traced")
	for i, run := range runs {
		attempt := run.Attributes()
		require.Contains(t, attempt, events.AttrJobID.String(id))
		var claim sdktrace.ReadOnlySpan
		for _, c := range claims {
			if c.SpanContext().SpanID() == run.Parent().SpanID() {
				claim = c
			}
		}
		require.NotNil(t, claim, "run %d is a child of a claim", i)
		require.Equal(t, ingest.SpanContext().SpanID(), claim.Parent().SpanID(), "every claim is a child of the ingest")
	}
	statuses := map[int64]string{}
	for _, run := range runs {
		for _, a := range run.Attributes() {
			if a.Key == events.AttrAttempt {
				statuses[a.Value.AsInt64()] = run.Status().Code.String()
			}
		}
	}
	require.Equal(t, map[int64]string{1: "Error", 2: "Unset"}, statuses)
}

// TestTraceThroughACoordinatorThatDoesNotTrace: a coordinator without a
// tracer still stores the submitter's trace context and hands it on, so
// that a traced executor's run joins the submitter's trace.
func TestTraceThroughACoordinatorThatDoesNotTrace(t *testing.T) {
	t.Parallel()
	h := traceSetup(t, noTracer, sdkTracer, map[string]executor.Handler{"traced": tracedTask})
	ctx, parent := h.tp.Tracer("test").Start(t.Context(), "submitter")
	id, err := h.client.Submit(ctx, fairway.Submission{Group: "acme", Task: "traced"})
	require.NoError(t, err)
	parent.End()
	h.final(id)
	spans := h.feed.await(t, parent.SpanContext().TraceID(), hasSpans(executor.SpanRun+"traced"))
	require.Equal(t, parent.SpanContext().SpanID(), only(t, spans, executor.SpanRun+"traced").Parent().SpanID())
}

func named(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func only(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	got := named(spans, name)
	require.Len(t, got, 1, "spans named %q among %s", name, spanNames(spans))
	return got[0]
}

func hasSpans(names ...string) func([]sdktrace.ReadOnlySpan) bool {
	return func(spans []sdktrace.ReadOnlySpan) bool {
		for _, n := range names {
			if len(named(spans, n)) == 0 {
				return false
			}
		}
		return true
	}
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}
