package coordinator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkDrain measures jobs/s for a backlog of no-op jobs over 10 groups
// through the pieces of `fairway dev`: submit to JetStream, ingest into
// PostgreSQL, fair dispatch, one executor, reports, events. It reports the
// submit rate and the work rate (submit of the first job to the success
// event of the last).
//
//	go test -run '^$' -bench Drain -benchtime 3x ./coordinator/
func BenchmarkDrain(b *testing.B) { drain(b, nil) }

// BenchmarkTraced is BenchmarkDrain with tracing on: every job's spans
// (ingest, claim, run) recorded by the SDK and batched to an exporter that
// drops them, so that it measures what tracing costs Fairway, not a
// network. Its name leaves it out of -bench Drain.
//
//	go test -run '^$' -bench Traced -benchtime 1x -count 3 ./coordinator/
func BenchmarkTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	drain(b, tp)
}

// drain runs BenchmarkDrain with the coordinator and the executor sending
// their spans to tp (nil: the global provider, a no-op).
func drain(b *testing.B, tp trace.TracerProvider) {
	const jobs = 10_000
	ctx := context.Background()
	ns, nc := natstest.Start(b)
	st := storetest.Open(b)
	coord, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Tracer: tp})
	if err != nil {
		b.Fatal(err)
	}
	if err := coord.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer coord.Stop()
	enc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	ex, err := executor.New(enc, executor.Config{AppID: "bench", PoolSize: 100, WakeupPeriod: time.Second, Tracer: tp})
	if err != nil {
		b.Fatal(err)
	}
	ex.Handle("noop", func(context.Context, *executor.Job) error { return nil })
	if err := ex.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer ex.Stop()
	client, err := events.NewClient(nc, events.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{}, jobs)
	sub, err := client.Subscribe(ctx, events.Filter{State: fairway.StateSuccess}, func(events.Event) { done <- struct{}{} })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Stop()
	var submitRate, workRate float64
	for range b.N {
		subs := make([]fairway.Submission, jobs)
		for i := range subs {
			subs[i] = fairway.Submission{Group: fmt.Sprintf("g%d", i%10), Task: "noop"}
		}
		start := time.Now()
		if _, err := client.SubmitMany(ctx, subs); err != nil {
			b.Fatal(err)
		}
		submitted := time.Since(start)
		for range jobs {
			select {
			case <-done:
			case <-time.After(time.Minute):
				b.Fatal("jobs did not finish within a minute")
			}
		}
		elapsed := time.Since(start)
		submitRate += float64(jobs) / submitted.Seconds()
		workRate += float64(jobs) / elapsed.Seconds()
	}
	b.ReportMetric(submitRate/float64(b.N), "submit_jobs/s")
	b.ReportMetric(workRate/float64(b.N), "work_jobs/s")
}
