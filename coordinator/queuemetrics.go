package coordinator

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Bounds of the queue gauges: they are read from PostgreSQL at most once
// per queueMetricsTTL (a scrape in between gets the last reading), within
// queueMetricsTimeout, and cover the queueMetricsSeries largest counts.
const (
	queueMetricsTTL     = 5 * time.Second
	queueMetricsTimeout = 5 * time.Second
	queueMetricsSeries  = 10_000
)

var (
	queueJobsDesc = prometheus.NewDesc("fairway_jobs",
		"Jobs not yet final, by group, task and state (pending, waiting, stuck, scheduled, running); read from the partition's state (the journal's) at most every 5 s.",
		[]string{"group", "task", "state"}, nil)
	queueOldestDesc = prometheus.NewDesc("fairway_oldest_due_seconds",
		"How long the oldest due waiting or stuck job of a group and task has been due (0: none is due).",
		[]string{"group", "task"}, nil)
	groupShareDesc = prometheus.NewDesc("fairway_group_share",
		"Each group's share of the executors' slot-time over the last 5 minutes (0..1), against fairway_group_fair_share; read from PostgreSQL at most every 5 s.",
		[]string{"group"}, nil)
	groupFairShareDesc = prometheus.NewDesc("fairway_group_fair_share",
		"Each group's weighted fair share over the last 5 minutes: its weight over the weights of the groups that ran jobs then.",
		[]string{"group"}, nil)
	partitionLeaderDesc = prometheus.NewDesc("fairway_partition_leader",
		"1 while this coordinator leads the journal's partition, else 0; read at most every 5 s, as the other partition gauges.",
		[]string{"partition"}, nil)
	partitionEpochDesc = prometheus.NewDesc("fairway_partition_epoch",
		"The fencing epoch of the partition's lease: it grows with each new leader (a rate of change says leaders change often).",
		[]string{"partition"}, nil)
	partitionJobsDesc = prometheus.NewDesc("fairway_partition_jobs",
		"Jobs not yet final in the partition, by state (pending, waiting, stuck, scheduled, running).",
		[]string{"partition", "state"}, nil)
	partitionLagDesc = prometheus.NewDesc("fairway_partition_event_lag_seconds",
		"Age of the oldest row of the partition's journal whose events its leader has not published yet (0: none): how far the events trail the changes.",
		[]string{"partition"}, nil)
	noExecutorDesc = prometheus.NewDesc("fairway_jobs_without_executor",
		"Jobs not started yet (pending, waiting, stuck) of a task no live executor runs, by task; read from the partition's state and the executors' registry at most every 5 s.",
		[]string{"task"}, nil)
)

// queueCollector exposes the queue gauges, read on scrape and cached.
type queueCollector struct {
	store *store.Store
	// parts count the unfinished jobs from the partitions' states
	// (fairway_job holds the records of ended jobs only). Set by
	// Coordinator.onJournal; nil until then, when a scrape reads none.
	parts partitions
	log   func(msg string, args ...any)

	mu         sync.Mutex
	readAt     time.Time
	counts     []fairway.QueueCount
	noExecutor map[string]int64
	shares     []fairway.GroupShare
	// partitions are the partitions' leases and event lags, and
	// partitionJobs their unfinished jobs by state, summed from each
	// one's counts (all of them, before the largest are kept).
	partitions    []journal.Status
	partitionJobs []map[fairway.State]int
}

// groupShareWindow is the window of the share gauges.
const groupShareWindow = 5 * time.Minute

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueJobsDesc
	ch <- queueOldestDesc
	ch <- noExecutorDesc
	ch <- groupShareDesc
	ch <- groupFairShareDesc
	ch <- partitionLeaderDesc
	ch <- partitionEpochDesc
	ch <- partitionJobsDesc
	ch <- partitionLagDesc
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if time.Since(q.readAt) >= queueMetricsTTL {
		// Each reading stands on its own, with its own time: one that
		// fails leaves the other, and the last reading is served.
		ctx, cancel := context.WithTimeout(context.Background(), queueMetricsTimeout)
		counts, jobs, err := q.queueCounts(ctx)
		cancel()
		if err != nil {
			q.log("reading the queue gauges; the last reading is served", "error", err)
		} else {
			q.counts, q.partitionJobs = counts, jobs
		}
		ctx, cancel = context.WithTimeout(context.Background(), queueMetricsTimeout)
		none, err := q.withoutExecutor(ctx, counts)
		if len(q.counts) > queueMetricsSeries {
			q.counts = q.counts[:queueMetricsSeries] // largest first
		}
		cancel()
		if err != nil {
			q.log("counting the jobs without an executor; the last count is served", "error", err)
		} else {
			q.noExecutor = none
		}
		ctx, cancel = context.WithTimeout(context.Background(), queueMetricsTimeout)
		shares, err := groupShares(ctx, q.store, q.parts, groupShareWindow)
		cancel()
		if err != nil {
			q.log("reading the groups' shares; the last reading is served", "error", err)
		} else {
			q.shares = shares
		}
		ctx, cancel = context.WithTimeout(context.Background(), queueMetricsTimeout)
		statuses := make([]journal.Status, 0, len(q.parts))
		for _, e := range q.parts {
			st, err := e.leader.LeaseStatus(ctx)
			if err != nil {
				q.log("reading the partitions' leases; the last reading is served", "error", err)
				statuses = q.partitions
				break
			}
			statuses = append(statuses, st)
		}
		cancel()
		q.partitions = statuses
		q.readAt = time.Now()
	}
	for i, p := range q.partitions {
		part := strconv.Itoa(int(p.Partition))
		leads := 0.0
		if p.Leading {
			leads = 1
		}
		ch <- prometheus.MustNewConstMetric(partitionLeaderDesc, prometheus.GaugeValue, leads, part)
		ch <- prometheus.MustNewConstMetric(partitionEpochDesc, prometheus.GaugeValue, float64(p.Epoch), part)
		ch <- prometheus.MustNewConstMetric(partitionLagDesc, prometheus.GaugeValue, p.Lag.Seconds(), part)
		// Every unfinished state, 0 included: a state that empties reads 0,
		// not a series gone.
		for _, state := range []fairway.State{fairway.StatePending, fairway.StateWaiting, fairway.StateStuck, fairway.StateScheduled, fairway.StateRunning} {
			n := 0
			if i < len(q.partitionJobs) {
				n = q.partitionJobs[i][state]
			}
			ch <- prometheus.MustNewConstMetric(partitionJobsDesc, prometheus.GaugeValue, float64(n), part, string(state))
		}
	}
	for _, s := range q.shares {
		ch <- prometheus.MustNewConstMetric(groupShareDesc, prometheus.GaugeValue, s.Share, s.Group)
		ch <- prometheus.MustNewConstMetric(groupFairShareDesc, prometheus.GaugeValue, s.FairShare, s.Group)
	}
	for task, n := range q.noExecutor {
		ch <- prometheus.MustNewConstMetric(noExecutorDesc, prometheus.GaugeValue, float64(n), task)
	}
	oldest := map[[2]string]float64{}
	for _, c := range q.counts {
		ch <- prometheus.MustNewConstMetric(queueJobsDesc, prometheus.GaugeValue, float64(c.Jobs), c.Group, c.Task, string(c.State))
		k := [2]string{c.Group, c.Task}
		oldest[k] = max(oldest[k], c.OldestDueSeconds)
	}
	for k, v := range oldest {
		ch <- prometheus.MustNewConstMetric(queueOldestDesc, prometheus.GaugeValue, v, k[0], k[1])
	}
}

// queueCounts reads the unfinished jobs' counts, largest first, every
// count, from the partitions' states (withoutExecutor reads them all;
// Collect keeps the queueMetricsSeries largest), and each partition's
// jobs by state.
func (q *queueCollector) queueCounts(ctx context.Context) ([]fairway.QueueCount, []map[fairway.State]int, error) {
	if q.parts == nil {
		return nil, nil, errors.New("the coordinator is not started")
	}
	var out []fairway.QueueCount
	jobs := make([]map[fairway.State]int, len(q.parts))
	for i, e := range q.parts {
		counts, err := e.leader.Counts(ctx, "", 0, time.Now())
		if err != nil {
			return nil, nil, err
		}
		jobs[i] = map[fairway.State]int{}
		for _, c := range counts {
			jobs[i][c.State] += int(c.Jobs)
		}
		out = append(out, counts...)
	}
	if len(q.parts) > 1 {
		slices.SortStableFunc(out, func(a, b fairway.QueueCount) int { return cmp.Compare(b.Jobs, a.Jobs) })
	}
	return out, jobs, nil
}

// withoutExecutor counts, per task, the jobs not started yet of the tasks
// no live executor runs, from counts (this reading's, nil if it failed)
// and the executors' registry.
func (q *queueCollector) withoutExecutor(ctx context.Context, counts []fairway.QueueCount) (map[string]int64, error) {
	if counts == nil {
		return nil, errors.New("the queue's counts were not read")
	}
	live, err := q.store.LiveTasks(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, c := range counts {
		if (c.State == fairway.StatePending || c.State == fairway.StateWaiting || c.State == fairway.StateStuck) && !slices.Contains(live, c.Task) {
			out[c.Task] += c.Jobs
		}
	}
	return out, nil
}
