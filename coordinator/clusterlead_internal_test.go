package coordinator

import (
	"log/slog"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestTheClusterLeadPassesOnWhenItsHolderStops: one coordinator takes the
// cluster's lead, the other reads that it leads; the holder stops writing
// (dead) and the other takes the lead once the key runs out; the first,
// back, reads that it leads no more. A stop (stopLeading, release) hands
// the lead over at the next read, not once the key runs out.
func TestTheClusterLeadPassesOnWhenItsHolderStops(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, nc := natstest.Start(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	var changes []string
	lead := func(holder string) *clusterLead {
		return &clusterLead{js: js, bucket: "TEST_LEAD", holder: holder, replicas: 1, log: slog.New(slog.DiscardHandler),
			alive: func(string) bool { return false }, changed: func(on bool) {
				if on {
					changes = append(changes, holder+" leads")
				}
			}}
	}
	a, b := lead("a"), lead("b")
	a.try(ctx)
	require.True(t, a.leads.Load(), "the first to find no holder leads")
	b.try(ctx)
	require.False(t, b.leads.Load())
	require.True(t, b.othersLead.Load(), "b reads that a leads")
	require.True(t, followCluster{a}.Take(0) && followCluster{a}.Keep(0), "a takes and keeps the partitions")
	require.False(t, followCluster{b}.Take(0) || followCluster{b}.Keep(0), "b gives them up")

	// a stops writing: b leads once the key runs out.
	began := time.Now()
	require.Eventually(t, func() bool { b.try(ctx); return b.leads.Load() }, 10*time.Second, 50*time.Millisecond, "b takes the lead a no longer writes")
	require.GreaterOrEqual(t, time.Since(began), clusterLeadTTL/2, "not before a's key ran out")
	a.try(ctx)
	require.False(t, a.leads.Load(), "a, back, leads no more")
	require.True(t, a.othersLead.Load())

	// b stops: a takes the lead at its next read.
	b.stopLeading()
	require.False(t, b.leads.Load())
	b.release(ctx)
	a.try(ctx)
	require.True(t, a.leads.Load(), "a key given up is taken at once")
	b.try(ctx)
	require.False(t, b.leads.Load(), "a stopped coordinator tries no more")
	require.Equal(t, []string{"a leads", "b leads", "a leads"}, changes)
}
