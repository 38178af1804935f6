package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOutboxEventIDsCarryTheRowsTime: an outbox row's events (one, or a
// pack's) have ids made of the row's id and time, so that a row of the
// same id in a database made anew or restored (the identity starts again)
// does not make the ids of events already published, which JetStream's
// duplicate window and the subscribers would drop.
func TestOutboxEventIDsCarryTheRowsTime(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	one := outboxRow{id: 41, ev: Event{Time: at}}
	pack := outboxRow{id: 41, ev: Event{Time: at}, jobIDs: []string{"a", "b"}}
	evs := pack.expand(one.expand(nil))
	require.Len(t, evs, 3)
	ids := map[string]bool{}
	for _, e := range evs {
		ids[e.ID] = true
	}
	require.Len(t, ids, 3, "one id each: %v", evs)
	require.Equal(t, evs[0].ID, one.expand(nil)[0].ID, "the same row, the same id")
	later := one
	later.ev.Time = at.Add(time.Microsecond)
	require.NotEqual(t, evs[0].ID, later.expand(nil)[0].ID, "the same row id at another time")
}
