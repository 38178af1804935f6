package coordinator

import (
	"encoding/json"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestStoreGaugesAndCounters: the metrics read from the store on scrape.
// Jobs of a task no live executor runs are counted by task; a batch that
// PostgreSQL refused and that was stored again checked is counted.
func TestStoreGaugesAndCounters(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	reg := prometheus.NewRegistry()
	newMetrics(reg, st, serviceLogger(t))
	subs := make([]fairway.Submission, 3)
	for i := range subs {
		subs[i] = fairway.Submission{Group: "acme", Task: "fragile"}
		require.NoError(t, subs[i].Normalize("", "", fairway.DefaultMaxArgsSize, 3))
	}
	subs[2].Args = json.RawMessage(`{"x":1e1000000}`) // PostgreSQL cannot store it
	_, err := st.InsertJobs(t.Context(), subs, nil)
	require.NoError(t, err)

	values := map[string]float64{}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "fairway_jobs_without_executor":
				require.Equal(t, "task", m.GetLabel()[0].GetName())
				values[f.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			case "fairway_ingest_checked_batches_total":
				values[f.GetName()] = m.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, map[string]float64{
		"fairway_jobs_without_executor/fragile": 2, // the third was refused
		"fairway_ingest_checked_batches_total":  1,
	}, values)
}
