package devtest

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// FinalEvent waits up to timeout for the final event of job id of group
// (or its rejected event), replaying the events from since, and fails t
// when none comes.
func FinalEvent(t testing.TB, client *events.Client, group, id string, since time.Time, timeout time.Duration) events.Event {
	t.Helper()
	final := make(chan events.Event, 1)
	sub, err := client.Subscribe(t.Context(), events.Filter{Group: group, Since: since}, func(ev events.Event) {
		if ev.JobID == id && (ev.State.Final() || ev.State == fairway.StateRejected) {
			select {
			case final <- ev:
			default:
			}
		}
	})
	if err != nil {
		t.Fatalf("following the events of job %s: %v", id, err)
	}
	defer sub.Stop()
	select {
	case ev := <-final:
		return ev
	case <-time.After(timeout):
		t.Fatalf("job %s reached no final state within %s", id, timeout)
		return events.Event{}
	}
}
