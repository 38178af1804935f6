package coordinator_test

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// TestPeriodicTaskWithRacingCoordinators drives three coordinators with a
// controlled clock: a due time fires once whoever races for it, a due time
// is skipped while the previous job has not ended, and runs missed while
// nothing fired collapse into one.
//
// On the journal engine the last job is the partition's state's, and a
// job fired is a submitted row (before, the firing wrote a row of the row
// engine, which never ran).
func TestPeriodicTaskWithRacingCoordinators(t *testing.T) {
	t.Parallel()
	periodicTaskWithRacingCoordinators(t)
}

func periodicTaskWithRacingCoordinators(t *testing.T) {
	ctx := t.Context()
	_, nc := natstest.Start(t)
	st := storetest.Open(t)
	clock, setClock := testClock(t)
	setClock("2026-11-23T08:01:00Z")
	var coords []*coordinator.Coordinator
	for range 3 {
		c, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Logger: testLogger(t), Clock: clock})
		require.NoError(t, err)
		require.NoError(t, c.Start(ctx))
		t.Cleanup(c.Stop)
		coords = append(coords, c)
	}
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	periodicEvents := make(chan events.Event, 100)
	sub, err := client.Subscribe(ctx, events.Filter{}, func(ev events.Event) {
		if ev.Periodic != "" {
			periodicEvents <- ev
		}
	})
	require.NoError(t, err)
	t.Cleanup(sub.Stop)

	p, err := client.SavePeriodic(ctx, fairway.PeriodicTask{ID: "poll", Enabled: true, Task: "echo", Group: "g", Timer: "*-*-* *:0/5"})
	require.NoError(t, err)
	require.Equal(t, "2026-11-23T08:05:00Z", p.NextRun.UTC().Format(time.RFC3339))

	fireAll := func() {
		var wg sync.WaitGroup
		for _, c := range coords {
			wg.Go(func() { c.FirePeriodic(ctx) })
		}
		wg.Wait()
	}
	jobs := func() []fairway.Job {
		list, err := client.List(ctx, events.ListRequest{Group: "g"})
		require.NoError(t, err)
		return list
	}
	nextRun := func() string {
		p, err := st.GetPeriodic(ctx, "poll")
		require.NoError(t, err)
		require.Nil(t, p.Marked, "unmarked after firing")
		return p.NextRun.UTC().Format(time.RFC3339)
	}

	// The coordinators' own periodic loops race the test's firing too (a
	// save wakes them all): each step waits for its event, whoever fired.
	var seen []events.Event
	next := func(want fairway.State) {
		t.Helper()
		select {
		case ev := <-periodicEvents:
			require.Equal(t, "poll", ev.Periodic)
			require.Equal(t, want, ev.State, "after %v", seen)
			seen = append(seen, ev)
		case <-time.After(waitTimeout):
			t.Fatalf("no %s event within %s; saw %v", want, waitTimeout, seen)
		}
	}

	fireAll() // 08:01: not due
	require.Empty(t, jobs())
	setClock("2026-11-23T08:05:00Z")
	fireAll()
	fireAll()
	next(fairway.StateFired)
	require.Len(t, jobs(), 1, "one job for one due time, whatever the number of coordinators")
	first := jobs()[0]
	require.Equal(t, "poll", first.Tracker)
	require.Equal(t, "2026-11-23T08:10:00Z", nextRun())

	setClock("2026-11-23T08:10:00Z")
	fireAll()
	next(fairway.StateSkipped)
	require.Len(t, jobs(), 1, "skipped while the previous job waits")
	require.Equal(t, "2026-11-23T08:15:00Z", nextRun())

	_, err = client.Cancel(ctx, "g", first.ID)
	require.NoError(t, err)
	setClock("2026-11-23T09:03:00Z") // 08:15 … 09:00 were missed
	fireAll()
	next(fairway.StateFired)
	require.Len(t, jobs(), 2, "missed runs collapse into one")
	require.Equal(t, "2026-11-23T09:05:00Z", nextRun())

	// The skipped event names the waiting job; nothing else fired.
	require.Equal(t, first.ID, seen[1].JobID)
	select {
	case ev := <-periodicEvents:
		t.Fatalf("an extra periodic event: %+v", ev)
	default:
	}
}

// TestRestartClearsMarksOfDeadCoordinators: a coordinator killed while it
// held a periodic task's mark, restarted on the same host, clears the mark
// at start instead of waiting for it to go stale (a minute).
func TestRestartClearsMarksOfDeadCoordinators(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, nc := natstest.Start(t)
	st := storetest.Open(t)
	// A pid that ran on this host and is gone, and one that runs (init).
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	host, err := os.Hostname()
	require.NoError(t, err)
	due := time.Now().Add(-time.Second)
	for _, m := range []struct {
		id  string
		pid int
	}{{"dead", gone.Process.Pid}, {"alive", 1}} {
		_, err := st.SavePeriodic(ctx, fairway.PeriodicTask{ID: m.id, Enabled: true, Task: "echo", Group: "g", Priority: fairway.PriorityLow, Timer: "*-*-* 00:00", NextRun: due})
		require.NoError(t, err)
		marked, err := st.MarkDuePeriodic(ctx, fmt.Sprintf("%s/%d/x", host, m.pid), time.Now(), time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, marked, 1)
		require.Equal(t, m.id, marked[0].ID)
	}

	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	c, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	t.Cleanup(c.Stop)
	fired := make(chan events.Event, 10)
	sub, err := client.Subscribe(ctx, events.Filter{State: fairway.StateFired, Since: time.Unix(0, 0)}, func(ev events.Event) { fired <- ev })
	require.NoError(t, err)
	t.Cleanup(sub.Stop)
	select {
	case ev := <-fired:
		require.Equal(t, "dead", ev.Periodic, "only the dead coordinator's mark is cleared")
	case <-time.After(waitTimeout):
		t.Fatal("the task marked by a dead coordinator did not fire")
	}
	p, err := st.GetPeriodic(ctx, "alive")
	require.NoError(t, err)
	require.NotNil(t, p.Marked, "a live coordinator keeps its mark")
}

// TestPeriodicTasksFollowPostgreSQLsClock: a coordinator whose host clock
// is an hour ahead computes a periodic task's next run from PostgreSQL's
// clock, so it neither fires an hour early nor makes the others wait.
func TestPeriodicTasksFollowPostgreSQLsClock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	skewed := func() time.Time { return time.Now().Add(time.Hour) }
	h, _ := setupWith(t, coordinator.Config{HostClock: skewed})
	st, client := h.store, h.client

	before, err := st.Now(ctx)
	require.NoError(t, err)
	p, err := client.SavePeriodic(ctx, fairway.PeriodicTask{ID: "every-5m", Enabled: true, Task: "echo", Group: "g", Timer: "*-*-* *:0/5"})
	require.NoError(t, err)
	after, err := st.Now(ctx)
	require.NoError(t, err)
	require.True(t, p.NextRun.After(before), "next run %s is after PostgreSQL's now() %s", p.NextRun, before)
	require.False(t, p.NextRun.After(after.Add(5*time.Minute)), "next run %s is at most 5 minutes after PostgreSQL's now() %s, not an hour ahead", p.NextRun, after)
	require.Zero(t, p.NextRun.Minute()%5)
	require.Zero(t, p.NextRun.Second())
}

// TestPeriodicTasksTakeCronExpressions: a periodic task's timer may be a
// standard cron expression, in a time zone: it is kept as written (its
// fields single-spaced), its next run is the expression's, it fires then,
// and its next run moves to the expression's next time; one that does not
// parse is refused, naming the timer.
func TestPeriodicTasksTakeCronExpressions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, nc := natstest.Start(t)
	st := storetest.Open(t)
	clock, setClock := testClock(t)
	setClock("2026-11-27T06:00:00+01:00") // a Friday, in Berlin
	c, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Logger: testLogger(t), Clock: clock})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	t.Cleanup(c.Stop)
	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	fired := make(chan events.Event, 10)
	sub, err := client.Subscribe(ctx, events.Filter{State: fairway.StateFired}, func(ev events.Event) { fired <- ev })
	require.NoError(t, err)
	t.Cleanup(sub.Stop)

	p, err := client.SavePeriodic(ctx, fairway.PeriodicTask{ID: "standup", Enabled: true, Task: "echo", Group: "g", Timer: "CRON_TZ=Europe/Berlin  15 6 * * 1-5"})
	require.NoError(t, err)
	require.Equal(t, "CRON_TZ=Europe/Berlin 15 6 * * 1-5", p.Timer, "as written")
	require.Equal(t, "2026-11-27T05:15:00Z", p.NextRun.UTC().Format(time.RFC3339), "06:15 in Berlin")

	setClock("2026-11-27T06:15:00+01:00")
	c.FirePeriodic(ctx)
	select {
	case ev := <-fired:
		require.Equal(t, "standup", ev.Periodic)
	case <-time.After(waitTimeout):
		t.Fatal("the cron timer did not fire")
	}
	p, err = st.GetPeriodic(ctx, "standup")
	require.NoError(t, err)
	require.Equal(t, "2026-11-30T05:15:00Z", p.NextRun.UTC().Format(time.RFC3339), "the next weekday, Monday")

	_, err = client.SavePeriodic(ctx, fairway.PeriodicTask{ID: "bad", Enabled: true, Task: "echo", Group: "g", Timer: "15 6 * *"})
	var fe *fairway.Error
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "timer", fe.Field)
	require.Contains(t, fe.Message, "5 fields")
}

// testClock is a clock the test sets (RFC 3339 times), for the
// coordinators' Config.Clock.
func testClock(t *testing.T) (clock func() time.Time, set func(string)) {
	var at atomic.Pointer[time.Time]
	return func() time.Time { return *at.Load() }, func(s string) {
		tm, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		at.Store(&tm)
	}
}
