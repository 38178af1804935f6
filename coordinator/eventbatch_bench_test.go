package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
)

// BenchmarkBatchEvents: the publisher's work per event for a read of
// 1,000 events of a drain (10 groups; scheduled, running and success
// events of each job), from the events to the messages' bodies.
func BenchmarkBatchEvents(b *testing.B) {
	subjects := events.NewSubjects("")
	subject := func(e store.Event) string { return subjects.Event(e.Group, e.Task, e.State) }
	now := time.Now()
	evs := make([]store.Event, 0, 1000)
	for j := 0; len(evs) < 1000; j++ {
		for _, st := range []fairway.State{fairway.StateScheduled, fairway.StateRunning, fairway.StateSuccess} {
			evs = append(evs, store.Event{ID: fmt.Sprintf("%d.%d", j/100, len(evs)), JobID: fmt.Sprintf("01a21475-7705-709d-86a3-%012d", j),
				Task: "work", Group: fmt.Sprintf("g%d", j%10), State: st, Attempt: 1, Executor: "bench-1", Time: now})
		}
	}
	evs = evs[:1000]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := batchEvents(evs, subject, appendEvent); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)), "ns/event")
}
