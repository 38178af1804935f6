package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
)

// BenchmarkClaim measures one fair claim of 50 jobs from a backlog of
// 10,000 waiting jobs in 10 groups (refilled as it drains).
//
//	go test -run '^$' -bench Claim ./internal/store/
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
	p := store.ClaimParams{Executor: "w", Limit: 50, Tasks: []string{"t"}, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}}
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

func normalized(n int) []fairway.Submission {
	subs := make([]fairway.Submission, n)
	for i := range subs {
		subs[i] = fairway.Submission{Group: fmt.Sprintf("g%d", i%10), Task: "t"}
		if err := subs[i].Normalize("", "", fairway.DefaultMaxArgsSize, 3); err != nil {
			panic(err)
		}
	}
	return subs
}

// BenchmarkInsertJobs measures storing a batch of 500 submissions (one
// transaction, events included).
//
//	go test -run '^$' -bench InsertJobs ./internal/store/
func BenchmarkInsertJobs(b *testing.B) {
	s := storetest.Open(b)
	const batch = 500
	n := 0
	for b.Loop() {
		b.StopTimer()
		subs := normalized(batch)
		b.StartTimer()
		if _, err := s.InsertJobs(b.Context(), subs, nil); err != nil {
			b.Fatal(err)
		}
		n += batch
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkComplete measures applying a batch of success outcomes, of
// several sizes: the cost per job must not grow with the batch.
//
//	go test -run '^$' -bench Complete ./internal/store/
func BenchmarkComplete(b *testing.B) {
	for _, batch := range []int{100, 1_000, 10_000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchmarkComplete(b, batch) })
	}
}

func benchmarkComplete(b *testing.B, batch int) {
	s := storetest.Open(b)
	ctx := b.Context()
	p := store.ClaimParams{Executor: "w", Limit: batch, Tasks: []string{"t"}, Lease: time.Minute, Scheme: fairway.CountingScheme{High: 4, Low: 1}}
	n := 0
	for b.Loop() {
		b.StopTimer()
		var jobs []fairway.Job
		for len(jobs) < batch {
			got, err := s.Claim(ctx, store.ClaimParams{Executor: p.Executor, Limit: batch - len(jobs), Tasks: p.Tasks, Lease: p.Lease, Scheme: p.Scheme})
			if err != nil {
				b.Fatal(err)
			}
			if len(got) == 0 {
				if _, err := s.InsertJobs(ctx, normalized(max(10_000, batch)), nil); err != nil {
					b.Fatal(err)
				}
				// Statistics taken while nearly every job waits, as
				// autovacuum takes them during a backlog: the planner then
				// expects almost no scheduled job to complete.
				if err := s.Analyze(ctx); err != nil {
					b.Fatal(err)
				}
			}
			jobs = append(jobs, got...)
		}
		outcomes := make([]store.Outcome, len(jobs))
		for i, j := range jobs {
			outcomes[i] = store.Outcome{Attempt: store.Attempt{Group: j.Group, JobID: j.ID, Attempt: j.Attempt, Executor: "w"}, Kind: "success"}
		}
		b.StartTimer()
		applied, err := s.Complete(ctx, outcomes, time.Second)
		if err != nil || len(applied) != len(outcomes) {
			b.Fatalf("applied %d of %d: %v", len(applied), len(outcomes), err)
		}
		n += len(applied)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkStats measures what one look at the dashboard costs PostgreSQL:
// the stats of the last hour in minutes over 100,000 jobs in 100 groups,
// 90,000 of them finished within the hour and 10,000 waiting.
//
//	go test -run '^$' -bench Stats -benchtime 10x ./internal/store/
func BenchmarkStats(b *testing.B) {
	s := storetest.Open(b)
	ctx := b.Context()
	for range 10 {
		subs := make([]fairway.Submission, 10_000)
		for i := range subs {
			subs[i] = fairway.Submission{Group: fmt.Sprintf("g%d", i%100), Task: fmt.Sprintf("t%d", i%5)}
			if err := subs[i].Normalize("", "", fairway.DefaultMaxArgsSize, 3); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.InsertJobs(ctx, subs, nil); err != nil {
			b.Fatal(err)
		}
	}
	s.SpreadHistory(b, 0.9)
	for b.Loop() {
		st, err := s.Stats(ctx, store.StatsParams{Window: time.Hour, Bucket: time.Minute}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if st.All.Ended != 90_000 || len(st.Groups) != 100 {
			b.Fatalf("ended %d, groups %d: the history is not the one built", st.All.Ended, len(st.Groups))
		}
	}
}
