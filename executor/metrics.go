package executor

import (
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// execMetrics are an executor's Prometheus metrics (Config.Metrics).
type execMetrics struct {
	wait *prometheus.HistogramVec // seconds from due to start, by task
	run  *prometheus.HistogramVec // seconds from start to end, by task and outcome
}

func newExecMetrics(reg prometheus.Registerer, e *Executor) *execMetrics {
	label := prometheus.Labels{"executor": e.cfg.AppID}
	metrics.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fairway_executor_slots",
		Help: "Jobs this executor runs at once (its pool size).", ConstLabels: label},
		func() float64 { e.mu.Lock(); defer e.mu.Unlock(); return float64(e.pool) }))
	metrics.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fairway_executor_slots_in_use",
		Help: "Jobs this executor holds: running, or finished and not yet reported.", ConstLabels: label},
		func() float64 { return float64(e.Running()) }))
	return &execMetrics{
		wait: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fairway_job_wait_seconds",
			Help:    "Time from when a job was due (submitted, its run-at, or its retry time) to its start on an executor, by task.",
			Buckets: metrics.JobBuckets}, []string{"task"})),
		run: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fairway_job_run_seconds",
			Help:    "Time a job's handler ran, by task and outcome (success, error, permanent, cancelled, released).",
			Buckets: metrics.JobBuckets}, []string{"task", "outcome"})),
	}
}

// started records a job's wait: from when it was due to now.
func (m *execMetrics) started(j fairway.Job, now time.Time) {
	due := j.Submitted
	if j.RunAt.After(due) {
		due = j.RunAt
	}
	if !due.IsZero() {
		m.wait.WithLabelValues(j.Task).Observe(max(now.Sub(due).Seconds(), 0))
	}
}

// finished records a job's run time.
func (m *execMetrics) finished(task string, out fairway.Outcome, took time.Duration) {
	m.run.WithLabelValues(task, string(out)).Observe(took.Seconds())
}
