package coordinator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkIngestPoison measures ingest alone: 20,000 submissions over 10
// groups wait in the submit stream, then a coordinator starts and stores
// them; the time is until the stream is empty (every submission stored or
// rejected, and acknowledged). "poison" has one submission in 500 (0.2%)
// that PostgreSQL cannot store (a number out of numeric's range, or a
// \u0000 in args); "clean" has none. Both run on the same servers, one
// after the other, in each iteration.
//
//	go test -run '^$' -bench IngestPoison -benchtime 1x -count 3 ./coordinator/
func BenchmarkIngestPoison(b *testing.B) {
	const n = 20_000
	ctx := context.Background()
	_, nc := natstest.Start(b)
	st := storetest.Open(b)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	subjects := events.NewSubjects("fairway")
	if err := events.EnsureStreams(ctx, js, subjects, events.StreamOptions{}); err != nil {
		b.Fatal(err)
	}
	stream, err := js.Stream(ctx, subjects.SubmitStream())
	if err != nil {
		b.Fatal(err)
	}
	batch := 0
	ingest := func(b *testing.B, poison bool) float64 {
		batch++
		var futures []jetstream.PubAckFuture
		for i := range n {
			body := fmt.Appendf(nil, `{"id":"b%d-%d","args":{"n":%d,"s":"some text"}}`, batch, i, i)
			if poison && i%500 == 250 {
				if i%1000 == 250 {
					body = fmt.Appendf(nil, `{"id":"b%d-%d","args":{"n":1e1000000}}`, batch, i)
				} else {
					body = fmt.Appendf(nil, `{"id":"b%d-%d","args":{"s":"a\u0000b"}}`, batch, i)
				}
			}
			f, err := js.PublishAsync(subjects.Submit(fmt.Sprintf("g%d", i%10), "t"), body)
			if err != nil {
				b.Fatal(err)
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
		coord, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{QuotaJobs: -1, QuotaSubmitRate: -1})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := coord.Start(ctx); err != nil {
			b.Fatal(err)
		}
		defer coord.Stop()
		for {
			info, err := stream.Info(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if info.State.Msgs == 0 {
				break
			}
			if time.Since(start) > 2*time.Minute {
				b.Fatal("ingest did not finish within 2 minutes")
			}
			time.Sleep(5 * time.Millisecond)
		}
		elapsed := time.Since(start)
		if splits := coord.Splits(); splits != 0 {
			b.Fatalf("%d batches split", splits)
		}
		return float64(n) / elapsed.Seconds()
	}
	var clean, poison float64
	for range b.N {
		clean += ingest(b, false)
		poison += ingest(b, true)
	}
	b.ReportMetric(clean/float64(b.N), "clean_subs/s")
	b.ReportMetric(poison/float64(b.N), "poison_subs/s")
	b.ReportMetric(poison/clean, "poison/clean")
}
