package store_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

// TestStats builds a history by hand and checks every part of Stats
// against it: finished counts in their buckets, wait and run percentiles,
// the slots and waiting jobs of each group over time, and the queue now.
func TestStats(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	ids := map[string]string{}
	for _, g := range []string{"a1:a", "a2:a", "b1:b", "c1:c", "d1:d"} {
		sb := sub(g[3:], fairway.PriorityHigh)
		sb.ID = g[:2]
		insert(t, s, sb)
		ids[g[:2]] = sb.ID
	}
	now, err := s.Now(ctx)
	require.NoError(t, err)
	at := func(d time.Duration) *time.Time { v := now.Add(d).Truncate(time.Second); return &v }
	t0 := *at(-8 * time.Minute)
	s.SetJobTimes(t, "a1", "success", t0, at(-8*time.Minute+30*time.Second), at(-8*time.Minute+90*time.Second))
	s.SetJobTimes(t, "a2", "failed", t0, at(-7*time.Minute), at(-5*time.Minute))
	s.SetJobTimes(t, "b1", "running", *at(-3 * time.Minute), at(-2*time.Minute), nil)
	s.SetJobTimes(t, "c1", "waiting", *at(-time.Minute), nil, nil)
	// A job shorter than a second, within one second: it still counts.
	dStart, dEnd := at(-4*time.Minute+100*time.Millisecond), at(-4*time.Minute+100*time.Millisecond)
	*dStart, *dEnd = dStart.Add(100*time.Millisecond), dEnd.Add(350*time.Millisecond)
	s.SetJobTimes(t, "d1", "success", dStart.Add(-50*time.Millisecond), dStart, dEnd)

	st, err := s.Stats(ctx, store.StatsParams{Window: 10 * time.Minute, Bucket: time.Minute}, nil)
	require.NoError(t, err)
	require.Equal(t, 60, st.BucketSeconds)
	require.Len(t, st.Buckets, 10)
	require.False(t, st.Since.After(t0), "the window covers the history")
	index := func(tm *time.Time) int { return int(tm.Sub(st.Since) / time.Minute) }

	require.ElementsMatch(t, []fairway.FinishedCount{
		{Bucket: index(at(-8*time.Minute + 90*time.Second)), Group: "a", Task: "t", State: fairway.StateSuccess, Jobs: 1},
		{Bucket: index(at(-5 * time.Minute)), Group: "a", Task: "t", State: fairway.StateFailed, Jobs: 1},
		{Bucket: index(dEnd), Group: "d", Task: "t", State: fairway.StateSuccess, Jobs: 1},
	}, st.Finished)

	require.Equal(t, int64(4), st.All.Started, "a1, a2, d1 and the running b1")
	require.Equal(t, int64(3), st.All.Ended)
	require.InDelta(t, 45, st.All.WaitP50, 0.5, "waits 0.05, 30, 60 and 60 s")
	require.InDelta(t, 60, st.All.RunP50, 0.5, "runs 0.25, 60 and 120 s")
	require.InDelta(t, 118.8, st.All.RunP99, 0.5)
	require.Len(t, st.Tasks, 1)
	require.Equal(t, "t", st.Tasks[0].Task)

	sum := func(xs []float64) float64 {
		total := 0.0
		for _, x := range xs {
			total += x
		}
		return total * 60 // job-seconds
	}
	series := map[string]fairway.GroupSeries{}
	for _, g := range st.Groups {
		require.Len(t, g.Running, 10)
		series[g.Group] = g
	}
	require.InDelta(t, 180, sum(series["a"].Running), 2, "a ran 60 + 120 s")
	require.InDelta(t, 90, sum(series["a"].Waiting), 2, "a waited 30 + 60 s")
	require.InDelta(t, 120, sum(series["b"].Running), 2, "b1 runs since 2 minutes")
	require.InDelta(t, 60, sum(series["b"].Waiting), 2)
	require.InDelta(t, 60, sum(series["c"].Waiting), 2, "c1 waits since a minute")
	require.Zero(t, sum(series["c"].Running))
	require.InDelta(t, 0.25, sum(series["d"].Running), 0.001, "a quarter of a second, exactly")
	require.InDelta(t, 0.05, sum(series["d"].Waiting), 0.001)
	require.InDelta(t, 1, series["b"].Running[len(st.Buckets)-2], 0.01, "b held one slot the whole minute before this one")

	queue := map[string]int64{}
	for _, q := range st.Queue {
		queue[q.Group+"/"+string(q.State)] = q.Jobs
	}
	require.Equal(t, map[string]int64{"b/running": 1, "c/waiting": 1}, queue)

	// One group's view holds that group only.
	st, err = s.Stats(ctx, store.StatsParams{Window: 10 * time.Minute, Bucket: time.Minute, Group: "a"}, nil)
	require.NoError(t, err)
	require.Len(t, st.Groups, 1)
	require.Equal(t, "a", st.Groups[0].Group)
	require.Len(t, st.Finished, 2)
	require.Empty(t, st.Queue)

	_, err = s.Stats(ctx, store.StatsParams{Window: 24 * time.Hour, Bucket: time.Second}, nil)
	require.ErrorIs(t, err, fairway.ErrInvalid)
	require.ErrorContains(t, err, "bucket")
}

// TestListFilters: priority, submission time and text over args and
// errors narrow a listing; the text is literal (no LIKE wildcards).
func TestListFilters(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	hi, lo, pct := sub("g", fairway.PriorityHigh), sub("g", fairway.PriorityLow), sub("g", fairway.PriorityLow)
	hi.Args = []byte(`{"invoice": "INV-77"}`)
	pct.Args = []byte(`{"note": "100% done"}`)
	insert(t, s, hi, lo, pct)
	list := func(p store.ListParams) []string {
		t.Helper()
		var ids []string
		_, err := s.ListJobs(ctx, p, func(j fairway.Job) bool { ids = append(ids, j.ID); return true })
		require.NoError(t, err)
		return ids
	}
	require.Equal(t, []string{hi.ID}, list(store.ListParams{Priority: fairway.PriorityHigh}))
	require.ElementsMatch(t, []string{lo.ID, pct.ID}, list(store.ListParams{Priority: fairway.PriorityLow}))
	require.Equal(t, []string{hi.ID}, list(store.ListParams{Text: "inv-77"}), "case is ignored")
	require.Equal(t, []string{pct.ID}, list(store.ListParams{Text: "0%"}), "% is a character, not a wildcard")
	require.Empty(t, list(store.ListParams{Text: "_NV"}), "_ is a character, not a wildcard")
	require.Empty(t, list(store.ListParams{Since: time.Now().Add(time.Hour)}))
	require.Len(t, list(store.ListParams{Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Hour)}), 3)

	s.SetJobTimes(t, lo.ID, "failed", time.Now(), nil, nil)
	_, err := s.Retry(ctx, "g", lo.ID)
	require.NoError(t, err)
	j, err := s.Get(ctx, "g", lo.ID)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, j.State)
	require.Nil(t, j.Finished)
	_, err = s.Retry(ctx, "g", hi.ID)
	require.ErrorIs(t, err, fairway.ErrConflict, "a waiting job is not retried")
}

// TestStatsOfLiveJobsAreTheRowsStats: the journal engine's unfinished
// jobs, given as StatsLive (their intervals' sets, as journal.Leader.LiveStats
// sums them; started held jobs; counts), make
// the same series, times and queue as the same jobs stored as rows: one
// running (submitted 3 minutes ago, started 2), two waiting since a
// minute, one waiting since before the window.
func TestStatsOfLiveJobsAreTheRowsStats(t *testing.T) {
	t.Parallel()
	rows, ctx := setup(t)
	now, err := rows.Now(ctx)
	require.NoError(t, err)
	at := func(d time.Duration) time.Time { return now.Add(d).Truncate(time.Second) }
	jobs := []struct {
		id, group, state string
		submitted        time.Time
		started          *time.Time
	}{
		{"r1", "a", "running", at(-3 * time.Minute), new(at(-2 * time.Minute))},
		{"w1", "b", "waiting", at(-time.Minute), nil},
		{"w2", "b", "waiting", at(-time.Minute), nil},
		{"w3", "b", "waiting", at(-20 * time.Minute), nil},
	}
	var intervals []journal.Interval
	live := &store.StatsLive{}
	for _, j := range jobs {
		sb := sub(j.group, fairway.PriorityHigh)
		sb.ID = j.id
		insert(t, rows, sb)
		rows.SetJobTimes(t, j.id, j.state, j.submitted, j.started, nil)
		to := int64(0)
		if j.started != nil {
			to = j.started.UnixMicro()
			intervals = append(intervals, journal.Interval{Group: j.group, Running: true, From: to, To: math.MaxInt64})
			live.Held = append(live.Held, journal.HeldStart{Task: "t", Started: to, Due: j.submitted.UnixMicro()})
		} else {
			to = math.MaxInt64 // now
		}
		intervals = append(intervals, journal.Interval{Group: j.group, From: j.submitted.UnixMicro(), To: to})
	}
	liveStats := func(_ context.Context, since, now time.Time, bucket time.Duration) (*store.StatsLive, error) {
		live.Sets = journal.SumIntervals(intervals, since, now, bucket)
		return live, nil
	}
	params := store.StatsParams{Window: 10 * time.Minute, Bucket: time.Minute}
	empty, _ := setup(t)
	want, err := rows.Stats(ctx, params, nil)
	require.NoError(t, err)
	live.Queue = want.Queue
	got, err := empty.Stats(ctx, params, liveStats)
	require.NoError(t, err)
	require.Equal(t, want.Buckets, got.Buckets, "one minute apart: run again")
	require.Equal(t, want.Queue, got.Queue)
	require.Equal(t, want.All, got.All)
	require.Equal(t, want.Tasks, got.Tasks)
	require.Len(t, got.Groups, len(want.Groups))
	for i, g := range want.Groups {
		require.Equal(t, g.Group, got.Groups[i].Group)
		// The two calls' nows are apart by their time: 3 jobs × 1 s / 60 s.
		require.InDeltaSlice(t, g.Running, got.Groups[i].Running, 0.05, "group %s running", g.Group)
		require.InDeltaSlice(t, g.Waiting, got.Groups[i].Waiting, 0.05, "group %s waiting", g.Group)
	}
	require.Positive(t, got.Groups[1].Waiting[len(got.Buckets)-1], "b waits now")
}
