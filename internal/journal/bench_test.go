package journal_test

import (
	"fmt"
	"testing"

	"github.com/fairwayhq/fairway/internal/journal"
)

// BenchmarkFoldJobLifecycle is the leader's CPU per job for the fold
// alone: a job's four rows (submitted with 200 bytes of args, claimed,
// started, ended), in batches of 100 jobs as ingest and claims append
// them, decoded and applied. go test -bench FoldJobLifecycle ./internal/journal/
func BenchmarkFoldJobLifecycle(b *testing.B) {
	const batch = 100
	args := fmt.Appendf(nil, `{"payload":"%0180d"}`, 0)
	var rows []journal.Row
	kinds := []journal.Kind{journal.Submitted, journal.Claimed, journal.Started, journal.Ended}
	id := int64(0)
	for n := 0; n < b.N; n += batch {
		for _, kind := range kinds {
			items := make([]journal.Item, batch)
			for k := range items {
				it := journal.Item{Group: fmt.Sprintf("g%d", (n+k)%50), ID: fmt.Sprintf("job-%09d", n+k), Attempt: 1, Executor: "w1", Instance: "inst-1"}
				switch kind {
				case journal.Submitted:
					it = journal.Item{Group: it.Group, ID: it.ID, Task: "echo", Priority: "low", MaxRetries: 3, Args: args}
				case journal.Ended:
					it.Outcome = journal.OutcomeSuccess
				}
				items[k] = it
			}
			body, err := journal.Encode(items)
			if err != nil {
				b.Fatal(err)
			}
			id++
			rows = append(rows, journal.Row{ID: id, Kind: kind, Body: body})
		}
	}
	s := journal.NewState()
	b.ReportAllocs()
	b.ResetTimer()
	for _, r := range rows {
		if _, err := s.Apply(r); err != nil {
			b.Fatal(err)
		}
	}
	if len(s.Jobs) != 0 {
		b.Fatalf("%d jobs did not end", len(s.Jobs))
	}
}
