package coordinator_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// TestIngestIsFairAcrossGroups: group B's one submission lies in the
// stream behind group A's backlog of 2,000 when a coordinator starts. In
// stream order B would be stored last; ingest reads ahead and takes its
// batches round-robin across groups, so B is stored as soon as it is
// within the read-ahead window, with most of A's backlog still to come.
func TestIngestIsFairAcrossGroups(t *testing.T) {
	ctx := t.Context()
	_, nc := natstest.Start(t)
	st := storetest.Open(t)
	cfg := coordinator.Config{IngestBatch: 50, Logger: testLogger(t)}
	// A first coordinator makes the streams, and stops.
	first, err := coordinator.New(storetest.Public(st), nc, cfg)
	require.NoError(t, err)
	require.NoError(t, first.Start(ctx))
	first.Stop()

	subjects := events.NewSubjects("")
	const backlog = 2000
	bodies := make([][]byte, backlog)
	for i := range bodies {
		bodies[i] = []byte(`{"args":{}}`)
	}
	publishRaw(t, nc, subjects.Submit("a", "work"), bodies...)
	publishRaw(t, nc, subjects.Submit("b", "work"), []byte(`{"args":{}}`))

	client, err := events.NewClient(nc, events.ClientOptions{})
	require.NoError(t, err)
	waiting := make(chan events.Event, backlog+1)
	sub, err := client.Subscribe(ctx, events.Filter{State: fairway.StateWaiting}, func(ev events.Event) { waiting <- ev })
	require.NoError(t, err)
	defer sub.Stop()
	second, err := coordinator.New(storetest.Public(st), nc, cfg)
	require.NoError(t, err)
	require.NoError(t, second.Start(ctx))
	defer second.Stop()
	for rank := 1; ; rank++ {
		select {
		case ev := <-waiting:
			if ev.Group != "b" {
				continue
			}
			t.Logf("B's job was stored %d of %d (read-ahead window: %d)", rank, backlog+1, 32*cfg.IngestBatch)
			// In stream order it would be last; with a window of 1,600 it
			// comes in about the batch after A's first 400.
			require.Less(t, rank, backlog-cfg.IngestBatch, "B's submission waited behind A's backlog")
			return
		case <-time.After(waitTimeout):
			t.Fatalf("B's job was not stored (%d of A's before)", rank-1)
		}
	}
}
