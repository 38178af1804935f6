package store_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

// TestToolQueries runs each statement the benchmark and the fault suite
// use, so that a schema change breaks this test rather than the tools.
func TestToolQueries(t *testing.T) {
	s, ctx := setup(t)
	require.NoError(t, s.FillHistory(ctx, 1, 10))
	require.NoError(t, s.Analyze(ctx))
	n, err := s.CountJobsWithPrefix(ctx, store.HistoryPrefix)
	require.NoError(t, err)
	require.Equal(t, 10, n)
	_, err = s.InsertJobs(ctx, []fairway.Submission{sub("g", "")}, nil)
	require.NoError(t, err)
	all, err := s.CountJobsWithPrefix(ctx, "")
	require.NoError(t, err)
	require.Equal(t, 11, all)

	final, err := s.CountFinal(ctx, []string{store.HistoryPrefix + "1", store.HistoryPrefix + "2", "nope"})
	require.NoError(t, err)
	require.Equal(t, 2, final)
	outbox, err := s.OutboxLen(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, outbox, "the submission's event; the history has none")

	jobs, err := s.AllJobAttempts(ctx)
	require.NoError(t, err)
	require.Len(t, jobs, 11)
	for _, j := range jobs {
		if j.ID == store.HistoryPrefix+"3" {
			require.Equal(t, store.JobAttempts{ID: j.ID, State: fairway.StateSuccess, Attempt: 1}, j)
		}
	}

	before, after, err := s.CountSubmittedAround(ctx, "g", time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 1}, [2]int{before, after})
	before, after, err = s.CountSubmittedAround(ctx, store.HistoryPrefix+"1", time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 0}, [2]int{before, after})
}
