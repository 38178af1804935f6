package coordinator

import (
	"log/slog"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/metrics"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// coordMetrics are a coordinator's Prometheus metrics (Config.Metrics). Names
// start with fairway_; those of the executor with fairway_executor_.
type coordMetrics struct {
	clusterLeader prometheus.Gauge       // 1 while this coordinator leads the cluster (clusterLead)
	queues        *queueCollector        // the queue gauges (fairway_jobs and others), read on scrape
	events        *prometheus.CounterVec // published events, by task, group and state
	outboxLag     prometheus.Gauge       // age of the oldest event of the last batch published
	ingestBatch   prometheus.Histogram   // submissions per ingest batch
	ingestTime    prometheus.Histogram   // seconds per ingest batch
	claimJobs     prometheus.Histogram   // jobs per claim
	claimTime     prometheus.Histogram   // seconds per claim
	reportBatch   prometheus.Histogram   // reports per batch applied
	reportTime    prometheus.Histogram   // seconds per report batch
	deadLetters   *prometheus.CounterVec // messages moved to the dead-letter stream, by kind
	quotaRefused  *prometheus.CounterVec // submissions refused by a quota, by which
	handedOver    prometheus.Counter     // jobs stored scheduled for an idle executor
	rateDeferred  prometheus.Counter     // submissions a batch passed over: their group is over its rate
	ingestSplits  prometheus.Counter     // batches PostgreSQL refused, split to find the submission it refuses
	forwarded     prometheus.Counter     // API requests forwarded to the journal's leader
}

// newMetrics registers a coordinator's metrics with reg; with nil, they
// are kept but not exposed.
func newMetrics(reg prometheus.Registerer, st *store.Store, log *slog.Logger) *coordMetrics {
	queues := &queueCollector{store: st, log: log.Warn}
	metrics.Register(reg, prometheus.Collector(queues))
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return metrics.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
	}
	return &coordMetrics{
		queues: queues,
		events: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fairway_events_total",
			Help: "Job state changes published as events, by task, group and new state; the final states (success, failed, cancelled) count finished jobs."},
			[]string{"task", "group", "state"})),
		clusterLeader: metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "fairway_cluster_leader",
			Help: "1 while this coordinator leads the cluster (answers dispatch requests and reports, takes the partitions' leases), else 0."})),
		outboxLag: metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "fairway_outbox_lag_seconds",
			Help: "Age of the oldest event of the last batch this coordinator published: how far events trail the changes they report."})),
		ingestBatch: hist("fairway_ingest_batch_size", "Submissions per batch stored by ingest.", metrics.BatchBuckets),
		ingestTime:  hist("fairway_ingest_batch_seconds", "Time to validate, admit and store one ingest batch.", metrics.TimeBuckets),
		claimJobs:   hist("fairway_claim_jobs", "Jobs handed out per claim (a dispatch request that got work).", metrics.BatchBuckets),
		claimTime:   hist("fairway_claim_seconds", "Time of one claim: the fair selection's transaction.", metrics.TimeBuckets),
		reportBatch: hist("fairway_report_batch_size", "Report messages (each one executor's batch of reports) per batch applied.", metrics.BatchBuckets),
		reportTime:  hist("fairway_report_batch_seconds", "Time to apply one batch of executor reports.", metrics.TimeBuckets),
		deadLetters: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fairway_dead_letters_total",
			Help: "Messages moved to the dead-letter stream, by kind (submission, report, event)."}, []string{"kind"})),
		quotaRefused: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fairway_quota_refusals_total",
			Help: "Submissions refused by a group's quota, by quota (rate: a request/reply submission that would wait for its group's rate past its deadline; jobs: queued jobs)."}, []string{"quota"})),
		rateDeferred: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "fairway_ingest_rate_deferrals_total",
			Help: "Times ingest passed over a group over its submission rate (coordinator.quota.submit-rate): its submissions wait in NATS and are stored later."})),
		ingestSplits: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "fairway_ingest_split_batches_total",
			Help: "Batches of submissions from the submit stream that PostgreSQL refused (an argument it cannot store, say), split in halves until the submissions it refuses are found: those are rejected on their own, the others stored."})),
		handedOver: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "fairway_jobs_handed_over_total",
			Help: "Jobs that ingest stored already scheduled for an idle executor (one waiting in a long poll), without a claim."})),
		forwarded: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "fairway_api_forwarded_total",
			Help: "API requests that change jobs which this coordinator, following the journal's partition, forwarded to its leader."})),
	}
}

// rejectedLabel is the task label of the events of rejected submissions
// (and their group's, when it is no valid name).
const rejectedLabel = "(rejected)"

// published counts a batch of events and the lag of its oldest.
func (m *coordMetrics) published(evs []fairway.Event) {
	if len(evs) == 0 {
		return
	}
	oldest := evs[0].Time
	for _, e := range evs {
		task, group := e.Task, e.Group
		if e.State == fairway.StateRejected {
			// A rejected submission's task is whatever its sender named
			// (any number of them); a rejected group is at least no name
			// of a group that exists, when it is not a valid one: the
			// series stay as many as the tasks executors run and the
			// groups.
			task = rejectedLabel
			if fairway.CheckName("group", group) != nil {
				group = rejectedLabel
			}
		}
		m.events.WithLabelValues(task, group, string(e.State)).Inc()
		if e.Time.Before(oldest) {
			oldest = e.Time
		}
	}
	m.outboxLag.Set(max(time.Since(oldest).Seconds(), 0))
}

// observe records one batch's size and duration.
func observe(size, seconds prometheus.Histogram, n int, start time.Time) {
	size.Observe(float64(n))
	seconds.Observe(time.Since(start).Seconds())
}
