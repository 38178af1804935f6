package coordinator

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// TestRejectedEventsAddNoSeries: submissions rejected for 1,000 unknown
// task names (and malformed groups) add one series of fairway_events_total
// per group, not one per name: a sender cannot grow /metrics without bound.
func TestRejectedEventsAddNoSeries(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry(), nil, slog.New(slog.DiscardHandler))
	var evs []fairway.Event
	for i := range 1000 {
		evs = append(evs,
			fairway.Event{Task: fmt.Sprintf("no-such-task-%d", i), Group: "acme", State: fairway.StateRejected, Time: time.Now()},
			fairway.Event{Task: "x", Group: fmt.Sprintf("bad group %d", i), State: fairway.StateRejected, Time: time.Now()})
	}
	evs = append(evs, fairway.Event{Task: "echo", Group: "acme", State: fairway.StateWaiting, Time: time.Now()})
	m.published(evs)
	ch := make(chan prometheus.Metric, 10_000)
	m.events.Collect(ch)
	close(ch)
	require.Len(t, ch, 3, "acme's rejections, the malformed groups', and echo's waiting")
	var acme dto.Metric
	require.NoError(t, m.events.WithLabelValues(rejectedLabel, "acme", string(fairway.StateRejected)).Write(&acme))
	require.Equal(t, 1000.0, acme.GetCounter().GetValue())
}
