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
// kept for ever.
func TestPrunerPrunesPastRetention(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.Open(t)
	e := startJournal(t, st, newFollowUps(), nil)
	storeJobs(t, e, fairway.Submission{Group: "g", ID: "c1"}, fairway.Submission{Group: "g", ID: "c2"},
		fairway.Submission{Group: "g", ID: "waits"})
	_, err := e.leader.Cancel(ctx, []fairway.JobRef{{Group: "g", ID: "c1"}, {Group: "g", ID: "c2"}}, "")
	require.NoError(t, err)
	for _, id := range []string{"c1", "c2"} {
		require.Eventually(t, func() bool { return jobState(t, e, "g", id) == fairway.StateCancelled }, serviceWait, 5*time.Millisecond, "%s's record", id)
	}
	cfg := pruneConfig{Retention: Retention{Cancelled: time.Millisecond, Success: -1, Failed: -1, Interval: time.Second}, Batch: 1, Pause: time.Millisecond}

	p := newPruner(cfg, storeBase(st, serviceLogger(t)))
	p.parts = partitions{{store: st}} // the database of its one partition: the records' (no leader needed)
	runService(t, p.run)
	require.Eventually(t, func() bool {
		return jobState(t, e, "g", "c1") == "" && jobState(t, e, "g", "c2") == ""
	}, serviceWait, 10*time.Millisecond, "both cancelled jobs are pruned, one batch each")
	require.Equal(t, fairway.StateWaiting, jobState(t, e, "g", "waits"))
}
