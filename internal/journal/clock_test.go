package journal_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/stretchr/testify/require"
)

// TestALeaderTimesJobsByPostgreSQLsClock: a leader whose host clock is an
// hour ahead (a bad RTC) reads PostgreSQL's clock (Leader.Now: the last
// renewal's now() plus the monotonic time since): a job delayed by half an
// hour is not claimed, one due now is; an hour behind, the same; and a
// host clock that steps while it leads (NTP) changes nothing, at once.
// With the host clock, the delayed job ran half an hour early (ahead),
// and a job retried by a leader whose clock was behind waited an hour
// longer once a coordinator with a right clock took over; with the host
// clock corrected at each renewal, a job that failed in the half second
// after a step was retried an hour late (the fault suite's clock-step).
func TestALeaderTimesJobsByPostgreSQLsClock(t *testing.T) {
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			ctx := t.Context()
			db := pool(t)
			var step atomic.Int64 // the host clock's, after the leader took the lease
			l := journal.NewLeader(db, journal.LeaderConfig{Holder: "c1", TTL: time.Hour, Renew: time.Hour, Poll: time.Hour,
				Clock: func() time.Time { return time.Now().Add(skew + time.Duration(step.Load())) }})
			go l.Run(ctx)
			require.Eventually(t, func() bool { return l.View(func(*journal.State, journal.Lease) {}) }, 10*time.Second, 5*time.Millisecond, "c1 leads")
			step.Store(int64(skew)) // it steps as far again
			var pgNow time.Time
			require.NoError(t, db.QueryRow(ctx, `SELECT now()`).Scan(&pgNow))

			submit := func(id string, runAt time.Time) {
				t.Helper()
				body, err := journal.Encode([]journal.Item{{Group: "g", ID: id, Task: "t", Priority: "low", MaxRetries: 3, RunAt: runAt.UnixMicro()}})
				require.NoError(t, err)
				require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
				l.Wake()
				require.Eventually(t, func() bool {
					var in bool
					l.View(func(s *journal.State, _ journal.Lease) { in = s.Jobs.Get(fairway.JobRef{Group: "g", ID: id}) != nil })
					return in
				}, 10*time.Second, 2*time.Millisecond, "the leader folds %s", id)
			}
			submit("later", pgNow.Add(30*time.Minute))
			submit("now", pgNow)
			jobs, err := l.Claim(ctx, claimParams("e", "i", 10))
			require.NoError(t, err)
			var ids []string
			for _, j := range jobs {
				ids = append(ids, j.Ref.ID)
			}
			require.Equal(t, []string{"now"}, ids, "only the job due now is claimed (the other is delayed by half an hour), whatever the host clock says")
			require.InDelta(t, 0, l.Now().Sub(pgNow).Seconds(), 60, "Now is PostgreSQL's clock, not the host's (%s off)", skew)
		})
	}
}

// TestARecordKeepsWhenItsHandlerEnded: a job's finished time is when its
// handler returned, as its executor reported it, not when the leader
// appended the end, however late its report came. A time from a skewed
// clock is kept within the attempt's start and the leader's now: one an
// hour ahead is now, one before the start is the start; one not said is
// now. The stats read the same times (fairway_record_stat).
func TestARecordKeepsWhenItsHandlerEnded(t *testing.T) {
	ctx := t.Context()
	db, l, jobs := claimedJobs(t, "g", "i", 4)
	var start int64 // when the claim handed them out: their handlers start then
	require.True(t, l.View(func(s *journal.State, _ journal.Lease) { start = s.Jobs.Get(jobs[0].Ref).Holder.Scheduled }))
	end := l.Now().UnixMicro() // a handler that ended just now
	exact, ahead, early, unsaid := jobs[0].Ref.ID, jobs[1].Ref.ID, jobs[2].Ref.ID, jobs[3].Ref.ID
	ended := map[string]int64{exact: end, ahead: end + time.Hour.Microseconds(), early: start - time.Minute.Microseconds()}
	var reports []journal.Report
	for _, j := range jobs {
		it := journal.Item{Group: j.Ref.Group, ID: j.Ref.ID, Attempt: j.Attempt, Executor: "e", Instance: "i"}
		started, end := it, it
		started.RunAt = start
		end.Outcome, end.EndedAt = journal.OutcomeSuccess, ended[j.Ref.ID]
		reports = append(reports, journal.Report{Kind: journal.Started, Item: started}, journal.Report{Kind: journal.Ended, Item: end})
	}
	_, err := l.Report(ctx, reports)
	require.NoError(t, err)
	// The leader's clock, not this host's: PostgreSQL's now() read at the
	// middle of a renewal's round trip may run ahead of the host's by up to
	// half of it (CI once failed here, j00 after the host's time.Now()).
	after := l.Now()

	took := map[string]time.Duration{}
	rows, err := db.Query(ctx, `SELECT id, started, finished FROM fairway_job`)
	require.NoError(t, err)
	defer rows.Close() // a failure within the loop: the pool's Close waited for it for ever
	for rows.Next() {
		var id string
		var started, finished time.Time
		require.NoError(t, rows.Scan(&id, &started, &finished))
		require.Equal(t, start, started.UnixMicro(), "%s: its start as reported", id)
		require.False(t, finished.After(after), "%s: not after the leader's now", id)
		took[id] = finished.Sub(started)
	}
	require.NoError(t, rows.Err())
	require.Len(t, took, 4)
	require.Equal(t, time.Duration(end-start)*time.Microsecond, took[exact], "as its executor reported it")
	require.Less(t, took[ahead], time.Minute, "an hour ahead: now")
	require.Zero(t, took[early], "before its start: its start")
	require.Less(t, took[unsaid], time.Minute, "not said: now")

	var stats []time.Duration
	rows, err = db.Query(ctx, `SELECT finished - started FROM fairway_record_stat`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var d time.Duration
		require.NoError(t, rows.Scan(&d))
		stats = append(stats, d)
	}
	require.NoError(t, rows.Err())
	require.ElementsMatch(t, []time.Duration{took[exact], took[ahead], took[early], took[unsaid]}, stats, "the stats read the same times")
}
