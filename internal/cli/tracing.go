package cli

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracingShutdownTimeout bounds the export of the last spans at exit.
const tracingShutdownTimeout = 5 * time.Second

// tracer is the process's tracer provider, built from the tracing.* keys
// on first use (the coordinator and the executor of fairway dev share
// it): nil when tracing.endpoint is empty, so that the coordinator and
// the executor fall back to otel's global provider, a no-op. Its spans
// are batched and sent over OTLP/HTTP; flushTracing sends the last ones.
func (e *env) tracer() (trace.TracerProvider, error) {
	e.tracingOnce.Do(func() {
		cfg := e.cfg.Tracing
		if cfg.Endpoint == "" {
			return
		}
		endpoint, err := otlpTracesURL(cfg.Endpoint)
		if err != nil {
			e.tracingErr = err
			return
		}
		// The exporter reads the standard OTEL_EXPORTER_OTLP_* variables
		// too (headers, certificates, timeout, compression); the
		// endpoint given here wins over theirs.
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint))
		if err != nil {
			e.tracingErr = fmt.Errorf("tracing.endpoint: %w", err)
			return
		}
		e.tracing = sdktrace.NewTracerProvider(
			sdktrace.WithBatcher(exp),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", cfg.ServiceName))),
		)
		e.log.Info("tracing", "endpoint", endpoint, "sample_ratio", cfg.SampleRatio, "service_name", cfg.ServiceName)
	})
	if e.tracing == nil {
		return nil, e.tracingErr
	}
	return e.tracing, e.tracingErr
}

// flushTracing sends the spans not yet sent and stops the exporter; the
// command calls it once the coordinator and the executor have stopped.
func (e *env) flushTracing() {
	if e.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
	defer cancel()
	if err := e.tracing.Shutdown(ctx); err != nil {
		e.log.Warn("sending the last spans", "error", err)
	}
}

// otlpTracesURL is the URL spans are posted to: tracing.endpoint, with
// OTLP's /v1/traces when it has no path (as OTEL_EXPORTER_OTLP_ENDPOINT
// is read), so that the receiver's base URL is enough.
func otlpTracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("tracing.endpoint: %w", err)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}
