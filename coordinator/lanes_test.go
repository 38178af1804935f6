package coordinator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/stretchr/testify/require"
)

// TestReadOnlyLaneDelaysNoOperator (issue 23): a web server's read-only
// users' requests wait in a lane of the operator API of their own
// (events.LaneWebReadOnly), so while that lane is busy (its stats held on
// the worker, more waiting behind), an admin's request through the web
// server (LaneWebAdmin) and an operator's own (no lane, or one the
// coordinators do not know) are answered. Before, the whole operator API
// was one lane that runs one request at a time: they waited behind every
// read-only request.
func TestReadOnlyLaneDelaysNoOperator(t *testing.T) {
	t.Parallel()
	h := apiSetup(t, coordinator.Config{}, nil, nil)
	ctx := t.Context()
	entered := make(chan struct{}, 16)
	release := make(chan struct{})
	h.coord.SetAPIHook(func(_, verb string) {
		if verb == events.VerbStats {
			entered <- struct{}{}
			<-release
		}
	})
	readOnly := events.WithLane(ctx, events.LaneWebReadOnly)
	var wg sync.WaitGroup
	const flood = 8
	errs := make(chan error, flood)
	for range flood {
		wg.Go(func() {
			_, err := h.client.Stats(readOnly, "", events.StatsRequest{Window: "1h"})
			errs <- err
		})
	}
	t.Cleanup(func() {
		close(release)
		wg.Wait()
	})
	<-entered // the read-only lane's one running request holds its worker

	// Each answers while the read-only lane is held: a second is plenty
	// (it waited for ever before).
	bounded := func(lane string) context.Context {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		t.Cleanup(cancel)
		if lane != "" {
			c = events.WithLane(c, lane)
		}
		return c
	}
	for _, lane := range []string{events.LaneWebAdmin, "", "no-such-lane"} {
		start := time.Now()
		_, _, err := h.client.ListPage(bounded(lane), events.ListRequest{Limit: 1})
		require.NoError(t, err, "list in lane %q", lane)
		_, err = h.client.Executors(bounded(lane))
		require.NoError(t, err, "executors in lane %q", lane)
		t.Logf("lane %q: list and executors answered in %s while the read-only lane was busy", lane, time.Since(start))
	}
	select {
	case err := <-errs:
		t.Fatalf("a read-only request was answered while its lane was held: %v", err)
	default:
	}
	// A tenant naming a lane still waits in its group's: the header is
	// the operator API's only (a tenant's request here is answered as
	// any other; its group's lane is free).
	_, _, err := h.client.ListPage(events.WithLane(bounded(""), events.LaneWebAdmin), events.ListRequest{Group: "a", Limit: 1})
	require.NoError(t, err)
}

// TestStatsRefusesAbsurdParameters (issue 23): whoever asks (here the
// operator API), stats refuses a window beyond 31 days, more than 1,440
// buckets, a bucket under a second or wider than its window, naming the
// field; equivalent spellings are answered alike.
func TestStatsRefusesAbsurdParameters(t *testing.T) {
	t.Parallel()
	h := apiSetup(t, coordinator.Config{}, nil, nil)
	ctx := t.Context()
	for _, c := range []struct {
		req   events.StatsRequest
		field string
	}{
		{events.StatsRequest{Window: "745h"}, "window"},
		{events.StatsRequest{Window: "-1h"}, "window"},
		{events.StatsRequest{Window: "744h", Bucket: "1s"}, "bucket"},
		{events.StatsRequest{Window: "1h", Bucket: "500ms"}, "bucket"},
		{events.StatsRequest{Window: "1h", Bucket: "2h"}, "bucket"},
		{events.StatsRequest{Window: "1h", Bucket: "soon"}, "bucket"},
	} {
		_, err := h.client.Stats(ctx, "", c.req)
		require.ErrorIs(t, err, fairway.ErrInvalid, "%+v", c.req)
		require.Equal(t, c.field, fairway.AsError(err).Field, "%+v: %v", c.req, err)
	}
	a, err := h.client.Stats(ctx, "", events.StatsRequest{Window: "60m", Bucket: "60s"})
	require.NoError(t, err)
	b, err := h.client.Stats(ctx, "", events.StatsRequest{Window: "3600s"})
	require.NoError(t, err)
	require.Equal(t, a.BucketSeconds, b.BucketSeconds)
	require.Len(t, b.Buckets, 60)
	_, err = h.client.Stats(ctx, "", events.StatsRequest{Window: "744h", Bucket: "31m"})
	require.NoError(t, err, "31 days of 31-minute buckets: 1,440")
}
