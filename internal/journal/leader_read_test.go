package journal_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/stretchr/testify/require"
)

// TestJobsReadsWhatWasCommittedBeforeIt: a read of unfinished jobs, on
// the leader or on a follower whose tail would not move for an hour, sees
// every row committed before it (a submission appended by another
// coordinator, the leader's claim), with the jobs' submissions whether
// their rows are kept in memory or read again; a job not submitted, or
// ended, is not among them.
func TestJobsReadsWhatWasCommittedBeforeIt(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	l := leading(t, db, "c1")
	// A follower that keeps no row in memory reads the submissions from
	// PostgreSQL.
	f := journal.NewLeader(db, journal.LeaderConfig{Holder: "c2", TTL: time.Hour, Renew: time.Hour, Poll: time.Hour, RecentBytes: 1})
	go f.Run(ctx)
	require.Eventually(t, func() bool { return f.Follow(func(*journal.State) {}) }, 10*time.Second, 5*time.Millisecond, "c2 follows")

	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	_, err = journal.Submit(ctx, tx, 0, []journal.Item{
		{Group: "g", ID: "a", Task: "t", Priority: "high", Args: []byte(`{"n":1}`), Subject: "s", Tracker: "tr", MaxRetries: 3},
		{Group: "g", ID: "b", Task: "t", Priority: "low", Pending: true},
		{Group: "g", ID: "c", Task: "t", Priority: "low", Waits: []string{"a"}},
	})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	a, b, c := fairway.JobRef{Group: "g", ID: "a"}, fairway.JobRef{Group: "g", ID: "b"}, fairway.JobRef{Group: "g", ID: "c"}
	nope := fairway.JobRef{Group: "g", ID: "nope"}
	for name, r := range map[string]*journal.Leader{"leader": l, "follower": f} {
		got, err := r.Jobs(ctx, []fairway.JobRef{a, b, nope, a})
		require.NoError(t, err, name)
		require.Len(t, got, 2, name)
		require.Equal(t, fairway.StateWaiting, got[a].Job.State(), name)
		require.Equal(t, "high", got[a].Job.Priority(), name)
		require.JSONEq(t, `{"n":1}`, string(got[a].Submission.Args), name)
		require.Equal(t, "tr", got[a].Submission.Tracker, name)
		require.Equal(t, "s", got[a].Submission.Subject, name)
		require.False(t, got[a].Submitted.IsZero(), name)
		require.Equal(t, fairway.StatePending, got[b].Job.State(), name)
	}

	// The leader's claim, committed, is seen by the follower's next read.
	jobs, err := l.Claim(ctx, claimParams("e", "i", 1))
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, a, jobs[0].Ref)
	got, err := f.Jobs(ctx, []fairway.JobRef{a})
	require.NoError(t, err)
	require.Equal(t, fairway.StateScheduled, got[a].Job.State())
	require.Equal(t, "i", got[a].Job.Holder.Instance)

	// Released by hand: only a pending job waiting for no dependency.
	released, err := l.ReleasePending(ctx, []fairway.JobRef{b, c, a, nope, b})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, false, false, false}, released)
	_, err = f.ReleasePending(ctx, []fairway.JobRef{b})
	require.ErrorIs(t, err, journal.ErrNotLeading)
	got, err = f.Jobs(ctx, []fairway.JobRef{b, c})
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, got[b].Job.State())
	require.Equal(t, fairway.StatePending, got[c].Job.State())

	// An ended job is no longer among them (its record says how it ended).
	_, err = l.Report(ctx, []journal.Report{{Kind: journal.Ended, Item: journal.Item{Group: "g", ID: "a", Attempt: 1, Executor: "e", Instance: "i", Outcome: journal.OutcomeSuccess}}})
	require.NoError(t, err)
	got, err = f.Jobs(ctx, []fairway.JobRef{a})
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestALeaderReleasesPendingJobsAtTheirTrigger: a pending job submitted
// with a trigger (trigger_after) is released by the leader at that time,
// by its own timer (the leader's tail is read once an hour here), due at
// once; one whose trigger passed before the leader started is released
// at its first catch-up; a pending job without one stays pending.
func TestALeaderReleasesPendingJobsAtTheirTrigger(t *testing.T) {
	ctx := t.Context()
	db := pool(t)
	soon := time.Now().Add(300 * time.Millisecond)
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	_, err = journal.Submit(ctx, tx, 0, []journal.Item{
		journal.ItemOf(fairway.Submission{Group: "g", ID: "past", Task: "t", Priority: "low", TriggerAfter: new(time.Now().Add(-time.Minute))}),
		journal.ItemOf(fairway.Submission{Group: "g", ID: "soon", Task: "t", Priority: "low", TriggerAfter: &soon}),
		journal.ItemOf(fairway.Submission{Group: "g", ID: "held", Task: "t", Priority: "low", Pending: true}),
	})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: time.Hour, Renew: time.Hour, Poll: time.Hour, Claimable: func() {}})
	go l.Run(ctx)
	state := func(id string) fairway.State {
		var st fairway.State
		l.View(func(s *journal.State, _ journal.Lease) {
			if j := s.Jobs.Get(fairway.JobRef{Group: "g", ID: id}); j != nil {
				st = j.State()
			}
		})
		return st
	}
	require.Eventually(t, func() bool { return state("past") == fairway.StateWaiting }, 10*time.Second, 5*time.Millisecond, "released at the first catch-up")
	require.Eventually(t, func() bool { return state("soon") == fairway.StateWaiting }, 10*time.Second, 5*time.Millisecond, "released at its trigger")
	require.False(t, l.Now().Before(soon), "not before its trigger, by the leader's clock (PostgreSQL's, which may run ahead of this host's by half a round trip)")
	require.Equal(t, fairway.StatePending, state("held"))
	jobs, err := l.Claim(ctx, claimParams("e", "i", 10))
	require.NoError(t, err)
	require.Len(t, jobs, 2, "both released jobs are due at once")
}
