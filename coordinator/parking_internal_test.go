package coordinator

import (
	"testing"

	"github.com/fairwayhq/fairway/events"
	"github.com/stretchr/testify/require"
)

// parkedOf is a parked request of instance with tasks and idle free slots
// (nil: it did not say).
func parkedOf(instance string, idle *int, tasks ...string) *parkedRequest {
	return &parkedRequest{req: events.DispatchRequest{Executor: "e-" + instance, Instance: instance, Slots: 2, Idle: idle, Tasks: tasks}}
}

func names(reqs []*parkedRequest) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.req.Instance
	}
	return out
}

// TestParkedRequestsWithAFreeSlotComeFirst: a job goes to an executor that
// starts it at once before one that would hold it behind a running job
// (prefetch), whichever asked first; an executor that did not say how many
// slots are free counts as free; among the same kind, oldest first. The
// hand-over at ingest (takeIdle) prefers them the same way, and a request
// that would only hold jobs sees that one with a free slot waits (idleFor).
func TestParkedRequestsWithAFreeSlotComeFirst(t *testing.T) {
	zero, one := 0, 1
	p := newParking()
	for _, r := range []*parkedRequest{parkedOf("holds", &zero, "ocr"), parkedOf("free", &one, "ocr"), parkedOf("old", nil, "mail"), parkedOf("holds-too", &zero, "mail")} {
		p.park(r, p.generation())
	}
	require.False(t, p.idleFor(parkedOf("asks", &zero, "ocr")), "the free one found nothing, and no work came since: the other claims at once")
	p.signal() // work came
	require.True(t, p.idleFor(parkedOf("asks", &zero, "ocr")))
	require.True(t, p.idleFor(parkedOf("asks", &zero, "mail")))
	require.False(t, p.idleFor(parkedOf("asks", &zero, "pdf")), "no free executor runs its task")
	require.False(t, p.idleFor(parkedOf("free", &zero, "ocr")), "its own request does not count")

	reqs := p.take()
	require.Equal(t, []string{"free", "old", "holds", "holds-too"}, names(reqs))
	for _, r := range reqs {
		r.gen = p.generation() // their claims found nothing after the wake
	}
	p.putBack(reqs)
	p.stopping.mark("e-old", "old") // said it stops: handed nothing
	all := func(*parkedRequest) bool { return true }
	var taken []string
	for r := p.takeIdle(all); r != nil; r = p.takeIdle(all) {
		taken = append(taken, r.req.Instance)
	}
	require.Equal(t, []string{"free", "holds", "holds-too"}, taken)
	require.Equal(t, []string{"old"}, names(p.take()), "the stopping one, left for its answer")
}

// TestAStoppingInstanceIsNotParked: once an instance said it stops, stop
// returns its parked request (to be answered empty), and none of its
// requests is held again: one that comes after, or one a serving round
// had out meanwhile, is returned instead, for an empty answer.
func TestAStoppingInstanceIsNotParked(t *testing.T) {
	one := 1
	p := newParking()
	first, late, out := parkedOf("leaving", &one, "ocr"), parkedOf("leaving", &one, "ocr"), parkedOf("leaving", &one, "ocr")
	require.Nil(t, p.park(first, p.generation()))
	require.Same(t, first, p.stop("e-leaving", "leaving"))
	require.Same(t, late, p.park(late, p.generation()), "sent before it said it stops, come after")
	require.Equal(t, []*parkedRequest{out}, p.putBack([]*parkedRequest{out}), "out in a serving round while it said so")
	require.Empty(t, p.take())
}
