package coordinator

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// TestPeriodicFirerFiresDueTasks runs the periodic firer alone with a
// controlled clock: a task not due yet is left alone; once the clock has
// passed its nextrun, the loop (kicked, as a change of a task does) fires
// it: a job tracked by the task, appended to the journal (its leader
// folds it and publishes its event), and the task's next run set.
func TestPeriodicFirerFiresDueTasks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := storetest.Open(t)
	var clock atomic.Pointer[time.Time]
	setClock := func(s string) {
		tm, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		clock.Store(&tm)
	}
	now := func(context.Context) (time.Time, error) { return *clock.Load(), nil }
	setClock("2026-11-23T08:01:00Z")
	nextRun, err := time.Parse(time.RFC3339, "2026-11-23T08:05:00Z")
	require.NoError(t, err)
	_, err = st.SavePeriodic(ctx, fairway.PeriodicTask{ID: "poll", Enabled: true, Task: "t", Group: "g", Priority: fairway.PriorityLow,
		Timer: "*-*-* *:0/5", NextRun: nextRun})
	require.NoError(t, err)
	f := newFollowUps()
	e := startJournal(t, st, f, nil)
	fired := func() string {
		id, err := e.leader.TrackerHolder(ctx, "g", "poll")
		require.NoError(t, err)
		return id
	}
	// MaxSleep of an hour: the loop looks at its start and when kicked.
	fr := newPeriodicFirer(periodicConfig{Retries: 3, MaxSleep: time.Hour}, storeBase(st, serviceLogger(t)), "host/1/test", now,
		f.kickOutbox)
	fr.parts = partitions{e}
	require.Equal(t, periodicMarkStale, fr.cfg.MarkStale)
	fr.fire(ctx) // what the loop does at its start: 08:01, not due
	require.Empty(t, fired())
	runService(t, fr.run)

	setClock("2026-11-23T08:05:30Z")
	fr.kick()
	require.Eventually(t, func() bool {
		p, err := st.GetPeriodic(ctx, "poll")
		return err == nil && p.NextRun.UTC().Format(time.RFC3339) == "2026-11-23T08:10:00Z" && p.Marked == nil
	}, serviceWait, 10*time.Millisecond, "the task fired and its next run is the first after now")
	require.Eventually(t, func() bool { return fired() != "" }, serviceWait, 5*time.Millisecond, "the leader folds the fired job")
	job, err := e.get(ctx, "g", fired())
	require.NoError(t, err)
	require.Equal(t, "poll", job.Tracker)
	require.Equal(t, 3, job.MaxRetries)
	require.Eventually(t, func() bool { return f.state(job.ID) == fairway.StateWaiting }, serviceWait, 5*time.Millisecond, "the leader publishes its event")
	require.Equal(t, 1, f.kicked(), "the fired event is published (the outbox)")
}
