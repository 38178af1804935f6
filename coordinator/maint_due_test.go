package coordinator

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// TestDueTimersWakeTheExecutorsWhenJobsBecomeDue runs the due timers
// alone: a delayed job stored before they start (load) and a due time
// added while they run each wake the executors once the time has come,
// not before.
func TestDueTimersWakeTheExecutorsWhenJobsBecomeDue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.Open(t)
	// Far enough ahead that it is still ahead when the timers load it on
	// a loaded machine (300 ms was not, once).
	runAt := time.Now().Add(2 * time.Second)
	storeJobs(t, st, fairway.Submission{Group: "g", ID: "later", RunAt: &runAt})

	f := newFollowUps()
	d := newDueTimers(dueConfig{}, storeBase(st, nil), time.Now, f.notifyWork)
	require.Equal(t, dueTimesCap, d.cfg.Cap)
	require.NoError(t, d.load(ctx))
	next, ok := d.next()
	require.True(t, ok, "the stored job's due time is loaded")
	require.WithinDuration(t, runAt, next, time.Millisecond)
	runService(t, d.run)

	awaitNotice := func(due time.Time) {
		t.Helper()
		select {
		case <-f.notices:
			require.False(t, time.Now().Before(due), "woken before the job was due")
		case <-time.After(serviceWait):
			t.Fatal("the executors were not woken when the job became due")
		}
	}
	awaitNotice(next) // as stored: PostgreSQL keeps microseconds
	_, ok = d.next()
	require.False(t, ok, "a due time is forgotten once it has come")

	later := time.Now().Add(200 * time.Millisecond)
	d.add(later)
	awaitNotice(later)
}

// TestDueTimersCap: beyond Cap, due times are not remembered (the
// executors' wakeup period catches them).
func TestDueTimersCap(t *testing.T) {
	t.Parallel()
	d := newDueTimers(dueConfig{Cap: 2}, serviceBase{}, time.Now, func() {})
	base := time.Now().Add(time.Hour)
	for i := range 3 {
		d.add(base.Add(-time.Duration(i) * time.Minute))
	}
	require.Equal(t, 2, d.h.Len())
	next, ok := d.next()
	require.True(t, ok)
	require.Equal(t, base.Add(-time.Minute), next, "the earliest of those remembered")
	require.False(t, d.popDue(time.Now()), "none is due yet")
	require.True(t, d.popDue(base))
	_, ok = d.next()
	require.False(t, ok)
}
