package coordinator_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/storetest"
)

// BenchmarkAPIGet measures a get's latency through the API, over 2,000
// waiting jobs, with two coordinators (NATS hands the request to either:
// each read first folds the rows committed before it, one round trip,
// then answers from the state; "changing" with 20 submissions a second
// appended meanwhile, so that reads have rows to fold). It reports the
// p50 and p99 in µs.
//
//	go test -run '^$' -bench APIGet -benchtime 2000x ./coordinator/
func BenchmarkAPIGet(b *testing.B) {
	for _, bc := range []struct {
		name     string
		changing bool
	}{
		{"quiet", false},
		{"changing", true},
	} {
		b.Run(bc.name, func(b *testing.B) { benchGet(b, bc.changing) })
	}
}

func benchGet(b *testing.B, changing bool) {
	ctx := b.Context()
	ns, nc := natstest.Start(b)
	st := storetest.Open(b)
	const coordinators = 2
	for i := range coordinators {
		conn, err := natsserver.Connect(ns, fmt.Sprintf("%s-%d", b.Name(), i))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(conn.Close)
		c, err := coordinator.New(storetest.Public(st), conn, coordinator.Config{APIRate: -1})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Stop)
	}
	client, err := events.NewClient(nc, events.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	subs := make([]fairway.Submission, 2000)
	for i := range subs {
		subs[i] = fairway.Submission{Group: fmt.Sprintf("g%d", i%10), Task: "echo", ID: fmt.Sprintf("j%04d", i), Args: []byte(`{"n":1}`)}
	}
	if _, err := client.SubmitMany(ctx, subs); err != nil {
		b.Fatal(err)
	}
	last := subs[len(subs)-1]
	for { // stored: every coordinator reads the last one
		if _, err := client.Get(ctx, last.Group, last.ID); err == nil {
			break
		}
		if ctx.Err() != nil {
			b.Fatal(ctx.Err())
		}
	}
	if changing {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				_, _ = client.Submit(ctx, fairway.Submission{Group: "other", Task: "echo", ID: fmt.Sprintf("c%06d", i)})
			}
		}()
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		s := subs[i%len(subs)]
		start := time.Now()
		if _, err := client.Get(ctx, s.Group, s.ID); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50_µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99_µs")
}
