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
