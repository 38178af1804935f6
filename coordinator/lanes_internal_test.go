package coordinator

import (
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// TestOperatorLanes (issue 23): an operator-API request waits in the lane
// its header names when the coordinators know it, else in the operator's;
// the lanes run apart, and a lane's refusal names it.
func TestOperatorLanes(t *testing.T) {
	for header, lane := range map[string]string{
		"":                     "",
		events.LaneWebReadOnly: "/web-readonly",
		events.LaneWebAdmin:    "/web-admin",
		"acme":                 "", // a group's name is not a lane: never a tenant's lane
		"anything":             "",
	} {
		msg := &nats.Msg{Header: nats.Header{}}
		if header != "" {
			msg.Header.Set(events.LaneHeader, header)
		}
		require.Equal(t, lane, operatorLane(msg), "header %q", header)
	}
	require.Equal(t, "", operatorLane(&nats.Msg{}), "no header at all")

	p := newAPIPool(2, 1, 16) // 2 queued per lane
	go p.work()
	go p.work()
	t.Cleanup(func() { p.close() })
	held, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, p.add("/web-readonly", func() { close(held); <-release }))
	<-held
	for range 2 {
		require.NoError(t, p.add("/web-readonly", func() {}))
	}
	err := p.add("/web-readonly", func() {})
	require.ErrorIs(t, err, fairway.ErrQuota)
	require.Contains(t, err.Error(), `operator API lane "web-readonly"`)
	ran := make(chan string, 2)
	require.NoError(t, p.add("", func() { ran <- "operator" }))
	require.NoError(t, p.add("/web-admin", func() { ran <- "web-admin" }))
	require.ElementsMatch(t, []string{"operator", "web-admin"}, []string{<-ran, <-ran}, "the other lanes run while the read-only one is held and full")
	close(release)
}
