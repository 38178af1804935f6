package journal_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/bench"
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
	if s.Jobs.Len() != 0 {
		b.Fatalf("%d jobs did not end", s.Jobs.Len())
	}
}

// BenchmarkSnapshotOfAMillionWaitingJobs is what a new leader pays to
// take over a partition with 1,000,000 waiting jobs before it reads the
// rows after the snapshot (condition 4 of issue 31: dispatch resumes
// within 3 s): encoding the snapshot, and restoring it.
// go test -run XXX -bench SnapshotOfAMillion -benchtime 3x ./internal/journal/
func BenchmarkSnapshotOfAMillionWaitingJobs(b *testing.B) {
	const jobs = 1_000_000
	s := journal.NewState()
	for i := 0; i < jobs; i += 1000 {
		items := make([]journal.Item, 1000)
		for k := range items {
			items[k] = journal.Item{Group: fmt.Sprintf("tenant-%03d", (i+k)%100), ID: fmt.Sprintf("01JABCDEFGHJKMNPQRST%06d", i+k),
				Task: "export", Priority: "low", MaxRetries: 3, RunAt: 1_700_000_000_000_000}
		}
		body, err := journal.Encode(items)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Apply(journal.Row{ID: int64(i + 1), Kind: journal.Submitted, Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			snap, err := s.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(snap))/jobs, "B/job")
		}
	})
	snap, err := s.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("restore", func(b *testing.B) {
		for b.Loop() {
			r, err := journal.Restore(snap)
			if err != nil {
				b.Fatal(err)
			}
			if r.Jobs.Len() != jobs {
				b.Fatalf("%d jobs restored", r.Jobs.Len())
			}
		}
	})
}

// BenchmarkTakeOverAMillionWaitingJobs is a new leader's restore of a
// partition with 1,000,000 waiting jobs, its snapshot in PostgreSQL and
// 10,000 rows after it, once the lease is its own: read and decode the
// snapshot, fold the rows after it, index the claimable jobs and make a
// first claim from memory (condition 4 of issue 31: dispatch resumes).
// go test -run XXX -bench TakeOverAMillion -benchtime 3x ./internal/journal/
func BenchmarkTakeOverAMillionWaitingJobs(b *testing.B) {
	const jobs, after = 1_000_000, 10_000
	ctx := b.Context()
	db := pool(b)
	s := journal.NewState()
	tail := &journal.Tail{}
	batch := func(from, to int) []byte {
		items := make([]journal.Item, 0, to-from)
		for i := from; i < to; i++ {
			items = append(items, journal.Item{Group: fmt.Sprintf("tenant-%03d", i%100), ID: fmt.Sprintf("01JABCDEFGHJKMNPQRST%07d", i),
				Task: "export", Priority: "low", MaxRetries: 3, RunAt: 1_700_000_000_000_000, Args: []byte(`{"n":1}`)})
		}
		body, err := journal.Encode(items)
		if err != nil {
			b.Fatal(err)
		}
		return body
	}
	var bodies [][]byte
	for i := 0; i < jobs; i += 1000 {
		bodies = append(bodies, batch(i, i+1000))
	}
	if err := journal.Append(ctx, db, 0, journal.Submitted, bodies...); err != nil {
		b.Fatal(err)
	}
	if _, err := tail.Fold(ctx, db, s); err != nil {
		b.Fatal(err)
	}
	if err := journal.SaveSnapshot(ctx, db, s, tail); err != nil {
		b.Fatal(err)
	}
	for i := jobs; i < jobs+after; i += 100 {
		if err := journal.Append(ctx, db, 0, journal.Submitted, batch(i, i+100)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		restored, from, err := journal.LoadSnapshot(ctx, db, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := from.Fold(ctx, db, restored); err != nil {
			b.Fatal(err)
		}
		if restored.Jobs.Len() != jobs+after {
			b.Fatalf("%d jobs restored", restored.Jobs.Len())
		}
		// Dispatch resumes: the queues indexed, and a first claim.
		q := journal.NewQueues(restored, time.Now().UnixMicro())
		cur := restored.Cursor
		if picked := q.Claim(journal.ClaimParams{Limit: 10, Tasks: []string{"export"}}, &cur, time.Now().UnixMicro()); len(picked) != 10 {
			b.Fatalf("%d jobs picked", len(picked))
		}
	}
}

// BenchmarkLeaderDrain is a drain on the journal engine as far as step 3
// builds it: jobs submitted in batches of 100 (200-byte args, 50
// groups), then claimed from the leader's memory 100 at a time (a claimed
// row, the fold, the args read from the submitting rows), each claim's
// jobs reported started and ended together (Leader.Report: a started and
// an ended row, and the jobs' records in fairway_job, in one transaction),
// until none is left. It reports the leader's and PostgreSQL's
// CPU per job (this process stands for the leader), the budget's unit:
// go test -run XXX -bench LeaderDrain -benchtime 3x ./internal/journal/
func BenchmarkLeaderDrain(b *testing.B) {
	const jobs, batch = 50_000, 100
	args := fmt.Appendf(nil, `{"payload":"%0180d"}`, 0)
	result := []byte(`{"ok":true}`)
	var pgCPU, goCPU, wall time.Duration
	for b.Loop() {
		b.StopTimer()
		ctx := b.Context()
		db := pool(b)
		for n := 0; n < jobs; n += batch {
			items := make([]journal.Item, batch)
			for k := range items {
				items[k] = journal.Item{Group: fmt.Sprintf("g%02d", (n+k)%50), ID: fmt.Sprintf("job-%09d", n+k), Task: "echo", Priority: "low", MaxRetries: 3, Args: args}
			}
			body, err := journal.Encode(items)
			if err != nil {
				b.Fatal(err)
			}
			if err := journal.Append(ctx, db, 0, journal.Submitted, body); err != nil {
				b.Fatal(err)
			}
		}
		l := journal.NewLeader(db, journal.LeaderConfig{Holder: "bench", TTL: time.Hour, Renew: time.Hour, Poll: time.Hour})
		go l.Run(ctx)
		for !l.View(func(*journal.State, journal.Lease) {}) {
			runtime.Gosched()
		}
		var backend int
		if err := db.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
			b.Fatal(err)
		}
		readPG, err := bench.PostgresCPU(backend)
		if err != nil {
			b.Fatal(err)
		}
		pg0, _ := readPG()
		go0, _ := bench.ThisProcessCPU()
		began := time.Now()
		b.StartTimer()
		p := journal.ClaimParams{Executor: "w", Instance: "i", Limit: batch, Tasks: []string{"echo"}, Scheme: fairway.CountingScheme{High: 3, Low: 1}}
		for done := 0; done < jobs; {
			claimed, err := l.Claim(ctx, p)
			if err != nil {
				b.Fatal(err)
			}
			if len(claimed) == 0 {
				b.Fatalf("nothing to claim after %d of %d jobs", done, jobs)
			}
			// A short job's start and end, reported together.
			reports := make([]journal.Report, 0, 2*len(claimed))
			for _, c := range claimed {
				it := journal.Item{Group: c.Ref.Group, ID: c.Ref.ID, Attempt: c.Attempt, Executor: "w", Instance: "i"}
				reports = append(reports, journal.Report{Kind: journal.Started, Item: it})
				it.Outcome, it.Result = journal.OutcomeSuccess, result
				reports = append(reports, journal.Report{Kind: journal.Ended, Item: it})
			}
			if _, err := l.Report(ctx, reports); err != nil {
				b.Fatal(err)
			}
			done += len(claimed)
		}
		b.StopTimer()
		wall += time.Since(began)
		pg1, _ := readPG()
		go1, _ := bench.ThisProcessCPU()
		pgCPU += pg1 - pg0
		goCPU += go1 - go0
		b.StartTimer()
	}
	n := float64(b.N * jobs)
	b.ReportMetric(n/wall.Seconds(), "jobs/s")
	b.ReportMetric(float64(pgCPU.Microseconds())/n, "pg-µs/job")
	b.ReportMetric(float64(goCPU.Microseconds())/n, "leader-µs/job")
}

// BenchmarkReleasesAmongManyWaitingJobs is what the leader's periodic
// releases cost it (ReleaseLost, ReleaseOverdue: each finds nothing to
// give back, the usual case) in a partition with 200,000 waiting jobs and
// 1,000 held by one live executor: the time the claims and reports wait
// for the leader's lock while they run. They walk the held jobs only.
// go test -run XXX -bench ReleasesAmongManyWaiting ./internal/journal/
func BenchmarkReleasesAmongManyWaitingJobs(b *testing.B) {
	const waiting, held = 200_000, 1_000
	ctx := b.Context()
	db := pool(b)
	var bodies [][]byte
	for i := 0; i < waiting+held; i += 1000 {
		items := make([]journal.Item, 1000)
		for k := range items {
			items[k] = journal.Item{Group: fmt.Sprintf("tenant-%03d", (i+k)%100), ID: fmt.Sprintf("job-%07d", i+k), Task: "export", Priority: "low", MaxRetries: 3}
		}
		body, err := journal.Encode(items)
		if err != nil {
			b.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	if err := journal.Append(ctx, db, 0, journal.Submitted, bodies...); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO fairway_executor (app_id, instance, slots, started, last_heartbeat, state)
VALUES ('w', 'i', 1000, now(), now() + interval '1 hour', 'live')`); err != nil {
		b.Fatal(err)
	}
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "bench", TTL: time.Hour, Renew: time.Hour, Poll: time.Hour})
	go l.Run(ctx)
	for !l.View(func(*journal.State, journal.Lease) {}) {
		runtime.Gosched()
	}
	p := journal.ClaimParams{Executor: "w", Instance: "i", Limit: held, Tasks: []string{"export"}, Scheme: fairway.CountingScheme{High: 3, Low: 1}}
	if claimed, err := l.Claim(ctx, p); err != nil || len(claimed) != held {
		b.Fatalf("claimed %d jobs: %v", len(claimed), err)
	}
	b.Run("lost", func(b *testing.B) {
		for b.Loop() {
			if n, err := l.ReleaseLost(ctx, time.Minute); err != nil || n != 0 {
				b.Fatalf("released %d: %v", n, err)
			}
		}
	})
	b.Run("overdue", func(b *testing.B) {
		for b.Loop() {
			if n, err := l.ReleaseOverdue(ctx, time.Minute, time.Now()); err != nil || n != 0 {
				b.Fatalf("released %d: %v", n, err)
			}
		}
	})
}

// BenchmarkReadsOfAMillionWaitingJobs: what the reads that walk the
// unfinished jobs cost with 1,000,000 of them waiting in 10,000 groups
// (docs/performance.md, "What reads cost the leader"): the gauges' and
// the stats' counts (Counts), a page of the list (List, of every group
// and of one), the stats' intervals (LiveStats), and a quota's count
// (LiveOf, no walk). The walks hold the state's lock: claims and reports
// wait that long.
func BenchmarkReadsOfAMillionWaitingJobs(b *testing.B) {
	const waiting, groups = 1_000_000, 10_000
	ctx := b.Context()
	db := pool(b)
	var bodies [][]byte
	for i := 0; i < waiting; i += 1000 {
		items := make([]journal.Item, 1000)
		for k := range items {
			items[k] = journal.Item{Group: fmt.Sprintf("tenant-%05d", (i+k)%groups), ID: fmt.Sprintf("job-%07d", i+k), Task: "export", Priority: "low",
				MaxRetries: 3, Args: []byte(`{"document":"d-000000000000000000000000000000000000000000000000000000000000000000000000000000"}`)}
		}
		body, err := journal.Encode(items)
		if err != nil {
			b.Fatal(err)
		}
		bodies = append(bodies, body)
		if len(bodies) == 50 {
			if err := journal.Append(ctx, db, 0, journal.Submitted, bodies...); err != nil {
				b.Fatal(err)
			}
			bodies = bodies[:0]
		}
	}
	l := journal.NewLeader(db, journal.LeaderConfig{Holder: "bench", TTL: time.Hour, Renew: time.Hour, Poll: time.Hour})
	go l.Run(ctx)
	for !l.View(func(*journal.State, journal.Lease) {}) {
		runtime.Gosched()
	}
	b.Run("counts", func(b *testing.B) {
		for b.Loop() {
			if counts, err := l.Counts(ctx, "", 0, time.Now()); err != nil || len(counts) != groups {
				b.Fatalf("%d counts: %v", len(counts), err)
			}
		}
	})
	b.Run("list-page", func(b *testing.B) {
		for b.Loop() {
			if jobs, err := l.List(ctx, journal.ListFilter{}, journal.Position{}, 101); err != nil || len(jobs) != 101 {
				b.Fatalf("%d jobs: %v", len(jobs), err)
			}
		}
	})
	b.Run("list-page-of-a-group", func(b *testing.B) {
		for b.Loop() {
			if jobs, err := l.List(ctx, journal.ListFilter{Group: "tenant-00042"}, journal.Position{}, 101); err != nil || len(jobs) != 100 {
				b.Fatalf("%d jobs: %v", len(jobs), err)
			}
		}
	})
	b.Run("stats-intervals", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := l.LiveStats(ctx, "", time.Now().Add(-time.Hour), time.Now(), time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A read of fairway_live waits for the leader (it looks every
	// LivePoll, 100 ms), which writes the whole table (rewrite: it came to
	// lead) or what changed since (nothing, here), then counts.
	liveCount := func(b *testing.B) {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM fairway_live`).Scan(&n); err != nil || n != waiting {
			b.Fatalf("fairway_live holds %d jobs: %v", n, err)
		}
	}
	b.Run("fairway_live-rewritten", func(b *testing.B) {
		for b.Loop() {
			l.ForgetLive()
			liveCount(b)
		}
	})
	b.Run("fairway_live", func(b *testing.B) {
		for b.Loop() {
			liveCount(b)
		}
	})
	b.Run("quota", func(b *testing.B) {
		for b.Loop() {
			if n, err := l.LiveOf(ctx, []string{"tenant-00042"}); err != nil || n["tenant-00042"] != 100 {
				b.Fatalf("%v: %v", n, err)
			}
		}
	})
}
