package executor

import (
	"cmp"
	"log/slog"
	"os"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of Config.
const (
	// PoolSizeDefault is the default number of jobs run at once.
	PoolSizeDefault = 4
	// LogBufferSizeDefault is the default bound on job log lines waiting
	// to be sent.
	LogBufferSizeDefault = 500
	// HeartbeatDefault is the default period of heartbeats.
	HeartbeatDefault = 5 * time.Second
	// WakeupPeriodDefault is the default period of an idle executor's
	// unprompted request for work.
	WakeupPeriodDefault = 10 * time.Second
	// TimeoutGraceDefault is how long a handler may go on after its
	// timeout before its attempt is reported failed anyway.
	TimeoutGraceDefault = 5 * time.Second
)

// Config configures an Executor.
type Config struct {
	// AppID names the executor. It must be unique among running executors
	// (the coordinators refuse a second one) and be one NATS subject token:
	// letters, digits, '-' and '_'. Required.
	AppID string
	// PoolSize is how many jobs the executor runs at once. Defaults to
	// PoolSizeDefault (4).
	PoolSize int
	// Prefetch is how many jobs the executor may hold beyond PoolSize,
	// waiting for a slot, so that a slot freed by a short job starts the
	// next one at once rather than after a dispatch round trip. It holds
	// only as many as the slots finish during one round trip (measured:
	// none for jobs that run long, since a job held here could run on
	// another executor meanwhile). Held jobs are leased like running ones,
	// count against concurrency limits, and are released unrun at
	// shutdown or when their task is paused. Defaults to PoolSize;
	// negative: none.
	Prefetch int
	// LogBufferSize bounds the job log lines waiting to be sent; a line
	// logged while the buffer is full is dropped and counted. Defaults to
	// LogBufferSizeDefault (500).
	LogBufferSize int
	// Heartbeat is how often the executor tells the coordinators it is
	// alive and which jobs it holds, renewing their leases. Defaults to
	// HeartbeatDefault (5s).
	Heartbeat time.Duration
	// WakeupPeriod is how often an idle executor asks for work without
	// being notified, in case a notification was lost. Defaults to
	// WakeupPeriodDefault (10s).
	WakeupPeriod time.Duration
	// Prefix is the first token of every subject. Defaults to "fairway".
	Prefix string
	// Host is the host name reported to the coordinators. Defaults to
	// os.Hostname().
	Host string
	// Logger receives the executor's own log. Defaults to discarding it.
	Logger *slog.Logger
	// Metrics, when set, is where the executor registers its Prometheus
	// metrics (see metrics.go and README "Metrics").
	Metrics prometheus.Registerer
	// Timeouts bounds each attempt of a task's jobs whose submission
	// names no timeout of its own: at the deadline the handler's context
	// is cancelled and the attempt fails with a timeout error (retried as
	// usual). A job's own timeout wins. Defaults to none: a task not in
	// the map runs as long as its handler does.
	Timeouts map[string]time.Duration
	// MaxConcurrent caps, per task, the jobs of it this executor runs at
	// once (as the MaxConcurrent option of Handle); other tasks take any
	// free slot.
	MaxConcurrent map[string]int
	// TimeoutGrace is how long a handler may go on after its timeout
	// before the attempt is reported failed anyway and its slot freed (the
	// handler's goroutine is left to return; what it returns is dropped).
	// Defaults to TimeoutGraceDefault (5s).
	TimeoutGrace time.Duration
	// Tracer is where the executor's spans go: "fairway.run <task>"
	// around each handler, a child of the job's trace (see
	// docs/tracing.md); the handler's context carries it. Defaults to
	// otel.GetTracerProvider(), the global provider: a no-op unless the
	// program set one.
	Tracer trace.TracerProvider
}

// WithDefaults returns c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	c.PoolSize = cmp.Or(c.PoolSize, PoolSizeDefault)
	c.Prefetch = cmp.Or(c.Prefetch, c.PoolSize)
	c.LogBufferSize = cmp.Or(c.LogBufferSize, LogBufferSizeDefault)
	c.Heartbeat = cmp.Or(c.Heartbeat, HeartbeatDefault)
	c.WakeupPeriod = cmp.Or(c.WakeupPeriod, WakeupPeriodDefault)
	c.TimeoutGrace = cmp.Or(c.TimeoutGrace, TimeoutGraceDefault)
	c.Prefix = cmp.Or(c.Prefix, events.DefaultPrefix)
	if c.Host == "" {
		c.Host, _ = os.Hostname()
		c.Host = cmp.Or(c.Host, "unknown")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Tracer == nil {
		c.Tracer = otel.GetTracerProvider()
	}
	return c
}

func (c Config) validate() error {
	if c.AppID == "" {
		return fairway.Invalid("AppID", "missing: every executor needs a unique app id")
	}
	if err := fairway.CheckName("AppID", c.AppID); err != nil {
		return err
	}
	if err := fairway.CheckName("Prefix", c.Prefix); err != nil {
		return err
	}
	if c.PoolSize < 1 {
		return fairway.Invalid("PoolSize", "%d is less than 1", c.PoolSize)
	}
	if c.LogBufferSize < 1 {
		return fairway.Invalid("LogBufferSize", "%d is less than 1", c.LogBufferSize)
	}
	if c.Heartbeat <= 0 {
		return fairway.Invalid("Heartbeat", "%s is not positive", c.Heartbeat)
	}
	if c.WakeupPeriod <= 0 {
		return fairway.Invalid("WakeupPeriod", "%s is not positive", c.WakeupPeriod)
	}
	if c.TimeoutGrace <= 0 {
		return fairway.Invalid("TimeoutGrace", "%s is not positive", c.TimeoutGrace)
	}
	for task, n := range c.MaxConcurrent {
		if n < 1 {
			return fairway.Invalid("MaxConcurrent", "task %q: %d is less than 1", task, n)
		}
	}
	for task, d := range c.Timeouts {
		if d <= 0 {
			return fairway.Invalid("Timeouts", "task %q: %s is not positive", task, d)
		}
	}
	return nil
}
