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
	require.NoError(t, p.add("/web-readonly", 0, func() { close(held); <-release }))
	<-held
	for range 2 {
		require.NoError(t, p.add("/web-readonly", 0, func() {}))
	}
	err := p.add("/web-readonly", 0, func() {})
	require.ErrorIs(t, err, fairway.ErrQuota)
	require.Contains(t, err.Error(), `operator API lane "web-readonly"`)
	ran := make(chan string, 2)
	require.NoError(t, p.add("", 0, func() { ran <- "operator" }))
	require.NoError(t, p.add("/web-admin", 0, func() { ran <- "web-admin" }))
	require.ElementsMatch(t, []string{"operator", "web-admin"}, []string{<-ran, <-ran}, "the other lanes run while the read-only one is held and full")
	close(release)
}

// TestAPIPoolBoundsBytesWaiting: the requests waiting are bounded in bytes
// per lane and in all, as in number: a lane with a large request waiting
// gets quota for one more, whatever the count; the pool, unavailable. A
// lane with nothing waiting takes a request of any size.
func TestAPIPoolBoundsBytesWaiting(t *testing.T) {
	p := newAPIPool(1, 1, 1024) // no worker runs: everything waits
	p.perGroupBytes, p.queueBytes = 10, 25
	require.NoError(t, p.add("acme", 8, func() {}))
	err := p.add("acme", 3, func() {})
	require.ErrorIs(t, err, fairway.ErrQuota, "acme's lane holds 8 of its 10 bytes")
	require.Contains(t, err.Error(), "MiB")
	require.NoError(t, p.add("globex", 12, func() {}), "a lane with nothing waiting takes a request of any size")
	err = p.add("initech", 6, func() {})
	require.ErrorIs(t, err, fairway.ErrUnavailable, "20 bytes of 25 waiting")
	require.NoError(t, p.add("initech", 5, func() {}))
	require.Len(t, p.close(), 3)
}
