package coordinator

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// TestPrunerPrunesPastRetention runs the pruner alone, a job per batch:
// it removes the finished jobs past their state's retention, batch after
// batch, and keeps the jobs that are not finished and those of a state
// kept for ever. A pruner that does not lead removes nothing.
func TestPrunerPrunesPastRetention(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.Open(t)
	storeJobs(t, st, fairway.Submission{Group: "g", ID: "c1"}, fairway.Submission{Group: "g", ID: "c2"},
		fairway.Submission{Group: "g", ID: "waits"})
	for _, id := range []string{"c1", "c2"} {
		_, err := st.Cancel(ctx, "g", id)
		require.NoError(t, err)
	}
	cfg := pruneConfig{Retention: Retention{Cancelled: time.Millisecond, Success: -1, Failed: -1, Interval: time.Second}, Batch: 1, Pause: time.Millisecond}

	idleCfg := cfg
	idleCfg.Retention.Interval = 10 * time.Millisecond
	lead := notLeading(t, st)
	idle := newPruner(idleCfg, st, serviceLogger(t), lead)
	runService(t, idle.run)
	// Three rounds without the lead.
	require.Eventually(t, func() bool { return lead.checks.Load() >= 3 }, serviceWait, 5*time.Millisecond, "the pruner goes round")
	require.Equal(t, fairway.StateCancelled, jobState(t, st, "g", "c1"), "a pruner that does not lead pruned")

	p := newPruner(cfg, st, serviceLogger(t), leading(t, st))
	runService(t, p.run)
	require.Eventually(t, func() bool {
		return jobState(t, st, "g", "c1") == "" && jobState(t, st, "g", "c2") == ""
	}, serviceWait, 10*time.Millisecond, "both cancelled jobs are pruned, one batch each")
	require.Equal(t, fairway.StateWaiting, jobState(t, st, "g", "waits"))
}
