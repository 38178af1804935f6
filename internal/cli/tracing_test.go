package cli_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/cli"
	"github.com/fairwayhq/fairway/internal/devtest"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/pgtest"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// exportedSpan is a span as an OTLP receiver got it.
type exportedSpan struct {
	service, name, traceID string
}

// otlpReceiver is an OTLP/HTTP receiver of traces on a local port: it
// hands every span posted to /v1/traces to the channel it returns.
func otlpReceiver(t *testing.T) (string, <-chan exportedSpan) {
	spans := make(chan exportedSpan, 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			t.Errorf("OTLP receiver: %s %s: %v", r.Method, r.URL.Path, err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			service := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans <- exportedSpan{service: service, name: s.Name, traceID: hex.EncodeToString(s.TraceId)}
				}
			}
		}
		data, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, spans
}

// TestCommandsSendSpans: `fairway coordinator` and `fairway executor` with
// --tracing-endpoint send the spans of a job, one trace under the
// submitter's span, to an OTLP/HTTP receiver (at /v1/traces of a URL
// without a path), each under its service name; the last ones when they
// stop.
func TestCommandsSendSpans(t *testing.T) {
	t.Parallel()
	endpoint, spans := otlpReceiver(t)
	ns, _ := natstest.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	coordErr, execErr := &devtest.Output{}, &devtest.Output{}
	coordDone, execDone := make(chan int, 1), make(chan int, 1)
	go func() {
		coordDone <- cli.Main(ctx, nil, []string{"coordinator", "--nats-url", ns.ClientURL(), "--database-url", pgtest.NewDB(t),
			"--tracing-endpoint", endpoint, "--tracing-service-name", "fairway-coordinator", "--log-format", "json"}, &bytes.Buffer{}, coordErr)
	}()
	go func() {
		execDone <- cli.Main(ctx, nil, []string{"executor", "--nats-url", ns.ClientURL(), "--app-id", "traced", "--http-addr", "",
			"--tracing-endpoint", endpoint, "--tracing-service-name", "fairway-executor", "--log-format", "json"}, &bytes.Buffer{}, execErr)
	}()
	select {
	case <-execErr.Seen("executor started"):
	case code := <-coordDone:
		t.Fatalf("fairway coordinator exited with %d:\n%s", code, coordErr)
	case code := <-execDone:
		t.Fatalf("fairway executor exited with %d:\n%s", code, execErr)
	case <-time.After(waitTimeout):
		t.Fatalf("the executor did not start within %s:\n%s\n%s", waitTimeout, coordErr, execErr)
	}

	nc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	final := make(chan events.Event, 1)
	sub, err := client.Subscribe(t.Context(), events.Filter{Group: "acme"}, func(ev events.Event) {
		if ev.State.Final() {
			final <- ev
		}
	})
	require.NoError(t, err)
	defer sub.Stop()
	tp := sdktrace.NewTracerProvider()
	sctx, parent := tp.Tracer("test").Start(t.Context(), "submitter")
	job, err := client.SubmitWait(sctx, fairway.Submission{Group: "acme", Task: "echo"})
	require.NoError(t, err)
	parent.End()
	select {
	case ev := <-final:
		require.Equal(t, fairway.StateSuccess, ev.State)
	case <-time.After(waitTimeout):
		t.Fatal("the job did not finish")
	}
	cancel() // the commands send their last spans as they stop
	require.Equal(t, 0, <-coordDone, coordErr.String())
	require.Equal(t, 0, <-execDone, execErr.String())

	traceID := parent.SpanContext().TraceID().String()
	want := map[string]string{"fairway.submit": "fairway-coordinator", "fairway.claim": "fairway-coordinator", "fairway.run echo": "fairway-executor"}
	got := map[string]string{}
	timeout := time.After(waitTimeout)
	for len(got) < len(want) {
		select {
		case s := <-spans:
			if s.traceID == traceID {
				got[s.name] = s.service
			}
		case <-timeout:
			t.Fatalf("spans of job %s's trace received: %v; want %v", job.ID, got, want)
		}
	}
	require.Equal(t, want, got, fmt.Sprintf("trace %s", traceID))
}
