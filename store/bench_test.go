package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/fairwayhq/fairway/store"
)

// BenchmarkClaim measures one fair claim of 50 jobs from a backlog of
// 10,000 waiting jobs in 10 groups (refilled as it drains).
//
//	go test -run '^$' -bench Claim ./store/
func BenchmarkClaim(b *testing.B) {
	s := storetest.Open(b)
	ctx := b.Context()
	fill := func() {
		subs := make([]fairway.Submission, 10_000)
		for i := range subs {
			subs[i] = fairway.Submission{Group: fmt.Sprintf("g%d", i%10), Task: "t"}
			if err := subs[i].Normalize("", "", fairway.DefaultMaxArgsSize, 3); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.InsertJobs(ctx, subs, nil); err != nil {
			b.Fatal(err)
		}
	}
	fill()
	p := store.ClaimParams{Worker: "w", Limit: 50, Tasks: []string{"t"}, Lease: time.Minute, Scheme: store.CountingScheme{High: 4, Low: 1}}
	claimed := 0
	for b.Loop() {
		jobs, err := s.Claim(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		claimed += len(jobs)
		if len(jobs) < p.Limit {
			b.StopTimer()
			fill()
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(claimed)/b.Elapsed().Seconds(), "jobs/s")
}
