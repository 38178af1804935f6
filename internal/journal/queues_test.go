package journal_test

import (
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/stretchr/testify/require"
)

// TestQueuesSayWhichJobsExpired: the jobs whose expiry passed and that no
// executor holds (waiting, stuck or pending), each once however often it
// was indexed, soonest first and a limit at a time; not one that expires
// later, nor one held (until it is given back), nor one that ended.
func TestQueuesSayWhichJobsExpired(t *testing.T) {
	s := journal.NewState()
	apply(t, s, row(t, 1, journal.Submitted,
		journal.Item{Group: "g", ID: "soon", Task: "t", ExpiresAt: 100},
		journal.Item{Group: "g", ID: "sooner", Task: "t", ExpiresAt: 50, Pending: true},
		journal.Item{Group: "g", ID: "later", Task: "t", ExpiresAt: 1_000},
		journal.Item{Group: "g", ID: "held", Task: "t", ExpiresAt: 10},
		journal.Item{Group: "g", ID: "ended", Task: "t", ExpiresAt: 10},
		journal.Item{Group: "g", ID: "never", Task: "t"}))
	apply(t, s, row(t, 2, journal.Claimed, journal.Item{Group: "g", ID: "held", Attempt: 1, Executor: "e", Instance: "i"}))
	apply(t, s, row(t, 3, journal.Cancel, journal.Item{Group: "g", ID: "ended"}))
	q := journal.NewQueues(s, 0)
	q.Update(fairway.JobRef{Group: "g", ID: "soon"}, 0) // indexed twice
	ref := func(id string) fairway.JobRef { return fairway.JobRef{Group: "g", ID: id} }
	require.Equal(t, []fairway.JobRef{ref("sooner")}, q.Expired(500, 1))
	require.Equal(t, []fairway.JobRef{ref("soon")}, q.Expired(500, 10))
	require.Empty(t, q.Expired(500, 10))
	// The held job is given back: it expires now.
	apply(t, s, row(t, 4, journal.Released, journal.Item{Group: "g", ID: "held", Attempt: 1, Executor: "e", Instance: "i"}))
	q.Update(ref("held"), 500)
	require.Equal(t, []fairway.JobRef{ref("held")}, q.Expired(500, 10))
	require.Equal(t, []fairway.JobRef{ref("later")}, q.Expired(1_000, 10))
}

// TestQueuesSayWhichPendingJobsReleaseThemselves: a pending job with a
// trigger is due at its time, once; one without, one waiting for a
// dependency, or one released before, is not; the earliest trigger is
// among the next due times.
func TestQueuesSayWhichPendingJobsReleaseThemselves(t *testing.T) {
	s := journal.NewState()
	apply(t, s, row(t, 1, journal.Submitted,
		journal.Item{Group: "g", ID: "soon", Task: "t", Pending: true, Trigger: true, RunAt: 100},
		journal.Item{Group: "g", ID: "later", Task: "t", Pending: true, Trigger: true, RunAt: 1_000},
		journal.Item{Group: "g", ID: "by-hand", Task: "t", Pending: true},
		journal.Item{Group: "g", ID: "released", Task: "t", Pending: true, Trigger: true, RunAt: 50},
		journal.Item{Group: "g", ID: "dep", Task: "t"},
		journal.Item{Group: "g", ID: "waits", Task: "t", Pending: true, Trigger: true, RunAt: 10, Waits: []string{"dep"}}))
	apply(t, s, row(t, 2, journal.Release, journal.Item{Group: "g", ID: "released"}))
	q := journal.NewQueues(s, 0)
	at, ok := q.NextDue()
	require.True(t, ok)
	require.Equal(t, int64(100), at, "the earliest trigger")
	require.False(t, q.TriggerDue(99))
	require.True(t, q.TriggerDue(500))
	ref := func(id string) fairway.JobRef { return fairway.JobRef{Group: "g", ID: id} }
	require.Equal(t, []fairway.JobRef{ref("soon")}, q.Triggered(500, 10))
	require.Empty(t, q.Triggered(500, 10))
	require.Equal(t, []fairway.JobRef{ref("later")}, q.Triggered(1_000, 10))
}
