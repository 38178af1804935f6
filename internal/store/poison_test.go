package store_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// outbox drains the outbox and returns its events.
func outbox(t *testing.T, s *store.Store) []store.Event {
	t.Helper()
	var all []store.Event
	for {
		n, err := s.PublishEvents(t.Context(), 1000, func(evs []store.Event) error { all = append(all, evs...); return nil })
		require.NoError(t, err)
		if n == 0 {
			return all
		}
	}
}

// A value PostgreSQL refuses, in one submission of a batch, costs one
// checked statement: the others are stored, the poison alone is rejected.
func TestInsertJobsIsolatesPoison(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	subs := normalized(500)
	subs[137].Args = json.RawMessage(`{"x":1e1000000}`) // past validation, as if it had not checked
	rejections := []store.Rejection{{JobID: "bad-id", Group: "g0", Task: "t", Err: fairway.Invalid("id", "nope")}}
	res, err := s.InsertJobs(ctx, subs, rejections)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.CheckedInserts(), "one checked statement, no per-row fallback")
	for i, r := range res {
		if i == 137 {
			require.ErrorIs(t, r.Err, fairway.ErrInvalid)
			require.Equal(t, "args", r.Err.Field)
			require.False(t, r.Created)
			continue
		}
		require.Nil(t, r.Err, i)
		require.True(t, r.Created, i)
	}
	_, err = s.Get(ctx, subs[137].Group, subs[137].ID)
	require.ErrorIs(t, err, fairway.ErrNotFound)
	var rejected []store.Event
	created := 0
	for _, e := range outbox(t, s) {
		switch e.State {
		case "rejected":
			rejected = append(rejected, e)
		case fairway.StateWaiting:
			created++
		}
	}
	require.Equal(t, 499, created)
	require.Len(t, rejected, 2)
	ids := []string{rejected[0].JobID, rejected[1].JobID}
	require.ElementsMatch(t, []string{"bad-id", subs[137].ID}, ids)

	// A clean batch takes the one statement.
	_, err = s.InsertJobs(ctx, normalized(10), nil)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.CheckedInserts())
}

// The numeric range that validation assumes is PostgreSQL's.
func TestNumericRangeMatchesPostgreSQL(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	docs := []string{`{"x":1e131071}`, `{"x":1e131072}`, `{"x":1e-16383}`, `{"x":1e-16384}`, `{"x":0e99999999}`, `{"x":1}`, `{"x":1e1000000}`}
	raw := make([][]byte, len(docs))
	var want []int
	for i, d := range docs {
		raw[i] = []byte(d)
		sub := fairway.Submission{Args: json.RawMessage(d)}
		if sub.Normalize("g", "t", 1<<20, 1) != nil {
			want = append(want, i)
		}
	}
	bad, err := s.UnstorableJSON(ctx, raw)
	require.NoError(t, err)
	require.Equal(t, want, bad)
	require.Equal(t, []int{1, 3, 6}, bad)
}

func TestCountQueuedJobs(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	insert(t, s, normalized(30)...) // g0..g9, 3 each, waiting
	held := sub("g0", fairway.PriorityLow)
	held.Pending = true
	insert(t, s, held)
	counts, err := s.CountQueuedJobs(ctx, []string{"g0", "g1", "nobody"}, 2)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"g0": 3, "g1": 2}, counts, "at most the limit per state")
	counts, err = s.CountQueuedJobs(ctx, []string{"g0"}, 100)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"g0": 4}, counts)
	// Claimed jobs are not queued any more.
	claim(t, s, "w", 5)
	counts, err = s.CountQueuedJobs(ctx, []string{"g0", "g1"}, 100)
	require.NoError(t, err)
	require.Less(t, counts["g0"]+counts["g1"], 7)
	// Each state is counted through its partial index.
	plan := s.ExplainCountQueued(t, "g0")
	require.Contains(t, plan, "fairway_job_eligible", plan)
	require.Contains(t, plan, "fairway_job_pending", plan)
}

// BenchmarkInsertPoison compares batches of 500 submissions, clean and
// with one value in 500 (0.2%) that PostgreSQL refuses (past validation,
// as if it had not checked), alternating in the same run.
//
//	go test -run '^$' -bench InsertPoison -count 3 ./internal/store/
func BenchmarkInsertPoison(b *testing.B) {
	s := storetest.Open(b)
	var clean, poison time.Duration
	n := 0
	for b.Loop() {
		for _, bad := range []bool{false, true} {
			b.StopTimer()
			subs := normalized(500)
			for i := range subs {
				subs[i].Group = fmt.Sprintf("%s-%d", subs[i].Group, n)
			}
			if bad {
				subs[250].Args = json.RawMessage(`{"x":1e1000000}`)
			}
			b.StartTimer()
			start := time.Now()
			if _, err := s.InsertJobs(b.Context(), subs, nil); err != nil {
				b.Fatal(err)
			}
			if bad {
				poison += time.Since(start)
			} else {
				clean += time.Since(start)
			}
			n++
		}
	}
	batches := float64(n / 2 * 500)
	b.ReportMetric(batches/clean.Seconds(), "clean_subs/s")
	b.ReportMetric(batches/poison.Seconds(), "poison_subs/s")
	b.ReportMetric(clean.Seconds()/poison.Seconds(), "poison/clean")
}
