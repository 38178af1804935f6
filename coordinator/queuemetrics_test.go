package coordinator

import (
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestQueueGaugesReadTheLeadersState: the queue gauges are read on
// scrape from the partition's state: the jobs of a task no live executor
// runs are counted by task, and the waiting jobs by group, task and
// state, and per partition its jobs by state and whether this
// coordinator leads it.
func TestQueueGaugesReadTheLeadersState(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	reg := prometheus.NewRegistry()
	metrics := newMetrics(reg, st, serviceLogger(t))
	e := startJournal(t, st, newFollowUps(), nil)
	metrics.queues.mu.Lock()
	metrics.queues.parts = partitions{e}
	metrics.queues.mu.Unlock()
	storeJobs(t, e, fairway.Submission{Group: "acme", Task: "fragile"}, fairway.Submission{Group: "acme", Task: "fragile"},
		fairway.Submission{Group: "hooli", Task: "fragile"})

	values := map[string]float64{}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				labels += "/" + l.GetValue()
			}
			switch f.GetName() {
			case "fairway_jobs_without_executor", "fairway_jobs", "fairway_partition_jobs", "fairway_partition_leader":
				values[f.GetName()+labels] = m.GetGauge().GetValue()
			case "fairway_partition_epoch":
				require.Positive(t, m.GetGauge().GetValue(), "the lease's epoch")
			}
		}
	}
	require.Equal(t, map[string]float64{
		"fairway_jobs_without_executor/fragile": 3,
		"fairway_jobs/acme/waiting/fragile":     2,
		"fairway_jobs/hooli/waiting/fragile":    1,
		"fairway_partition_jobs/0/waiting":      3,
		"fairway_partition_jobs/0/pending":      0,
		"fairway_partition_jobs/0/stuck":        0,
		"fairway_partition_jobs/0/scheduled":    0,
		"fairway_partition_jobs/0/running":      0,
		"fairway_partition_leader/0":            1,
	}, values)
}
