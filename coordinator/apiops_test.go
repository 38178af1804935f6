package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/executor"
	"github.com/stretchr/testify/require"
)

// TestBulkRetryAndStats: a bulk preview counts what a filter matches and
// changes nothing; a bulk cancel ends exactly those jobs (and no other
// group's); a bulk retry runs them again; stats then count what ran, per
// group and through the tenant API for its own group only.
//
// On the journal engine too: the list, the changes and the stats are the
// journal's (a bulk goes to the partition's leader).
func TestBulkRetryAndStats(t *testing.T) {
	t.Parallel()
	bulkRetryAndStats(t, setupRetrying(t))
}

func bulkRetryAndStats(t *testing.T, h *harness) {
	ctx := t.Context()
	later := time.Now().Add(time.Hour)
	stored := func(group string) string { // through the request/reply API: stored when it returns
		t.Helper()
		reply, err := h.client.SubmitReply(ctx, fairway.Submission{Group: group, Task: "echo", RunAt: &later, Args: []byte(`{"batch": "nightly"}`)})
		require.NoError(t, err)
		return reply.ID
	}
	var mine []string
	for range 5 {
		mine = append(mine, stored("a"))
	}
	other := stored("b")

	filter := events.ListRequest{Group: "a", Text: "NIGHTLY"}
	res, err := h.client.Bulk(ctx, "", events.BulkRequest{Action: events.BulkCancel, Filter: filter, Preview: true})
	require.NoError(t, err)
	require.Equal(t, 5, res.Matched)
	require.Zero(t, res.Changed, "a preview changes nothing")
	res, err = h.client.Bulk(ctx, "", events.BulkRequest{Action: events.BulkCancel, Filter: filter, Limit: 3})
	require.NoError(t, err)
	require.Equal(t, 3, res.Matched)
	require.True(t, res.More, "two more match beyond the limit")
	require.Equal(t, 3, res.Changed)
	res, err = h.client.Bulk(ctx, "a", events.BulkRequest{Action: events.BulkCancel, Filter: events.ListRequest{Group: "b"}})
	require.ErrorIs(t, err, fairway.ErrInvalid, "the tenant API refuses a filter naming another group")
	require.Nil(t, res)
	res, err = h.client.Bulk(ctx, "a", events.BulkRequest{Action: events.BulkCancel, Filter: events.ListRequest{State: fairway.StateWaiting}})
	require.NoError(t, err)
	require.Equal(t, 2, res.Changed, "the tenant API acts on its own group only")
	for _, id := range mine {
		job, err := h.client.Get(ctx, "a", id)
		require.NoError(t, err)
		require.Equal(t, fairway.StateCancelled, job.State)
	}
	job, err := h.client.Get(ctx, "b", other)
	require.NoError(t, err)
	require.Equal(t, fairway.StateWaiting, job.State, "another group's job is untouched")

	// Retry them all, due now: an executor runs them.
	h.executor("ex1", 4, map[string]executor.Handler{"echo": echo})
	_, err = h.client.Retry(ctx, "a", mine[0])
	require.NoError(t, err)
	res, err = h.client.Bulk(ctx, "", events.BulkRequest{Action: events.BulkRetry, Filter: events.ListRequest{Group: "a", State: fairway.StateCancelled}})
	require.NoError(t, err)
	require.Equal(t, 4, res.Changed)
	succeeded := map[string]bool{}
	h.until(func(ev events.Event) bool {
		if ev.State == fairway.StateSuccess {
			succeeded[ev.JobID] = true
		}
		return len(succeeded) == len(mine)
	})
	for _, id := range mine {
		require.True(t, succeeded[id], "job %s ran again", id)
	}
	_, err = h.client.Retry(ctx, "a", mine[0])
	require.ErrorIs(t, err, fairway.ErrConflict, "a success is not retried")

	st, err := h.client.Stats(ctx, "", events.StatsRequest{Window: "10m", Bucket: "1m"})
	require.NoError(t, err)
	require.Len(t, st.Buckets, 10)
	counted := int64(0)
	for _, f := range st.Finished {
		if f.State == fairway.StateSuccess {
			require.Equal(t, "a", f.Group)
			counted += f.Jobs
		}
	}
	require.Equal(t, int64(5), counted)
	require.Equal(t, int64(5), st.All.Ended)
	groups := map[string]bool{}
	for _, q := range st.Queue {
		groups[q.Group] = true
	}
	require.True(t, groups["b"], "b's job waits: %+v", st.Queue)

	st, err = h.client.Stats(ctx, "b", events.StatsRequest{Window: "10m", Group: "a"})
	require.ErrorIs(t, err, fairway.ErrInvalid, "a tenant asks about its own group only")
	require.Nil(t, st)
	st, err = h.client.Stats(ctx, "b", events.StatsRequest{Window: "10m"})
	require.NoError(t, err)
	require.Empty(t, st.Finished, "b finished nothing")
	_, err = h.client.Stats(ctx, "", events.StatsRequest{Window: "soon"})
	require.ErrorContains(t, err, "window")
}

// TestDrainStopsTheExecutor: an operator's drain reaches the executor,
// which says so; an unknown executor is not found.
func TestDrainStopsTheExecutor(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ex := h.executor("ex1", 1, map[string]executor.Handler{"echo": echo})
	require.NoError(t, h.client.Drain(t.Context(), "ex1"))
	select {
	case <-ex.DrainRequested():
	case <-time.After(waitTimeout):
		t.Fatal("the executor did not hear the drain")
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	require.NoError(t, ex.Shutdown(ctx))
	require.ErrorIs(t, h.client.Drain(t.Context(), "nobody"), fairway.ErrNotFound)
}
