package coordinator_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/nats-io/nats.go"
)

// BenchmarkAPIListFlood measures tenant B's get latency while tenant A
// floods list: 8 clients of A ask, as fast as they are answered, for
// limit 1000 with args (full) over 50 jobs of 1 MiB args; B gets one small
// job b.N times, one request at a time. It reports B's p50 and p99 and the
// peak Go heap in use of the process (coordinator, NATS server and the
// clients, which hold A's replies, sampled every 20 ms), and A's answers.
// "quota" runs with the default rate quota (100/s, burst 200), "unlimited"
// without, so that only the worker pool's fair share protects B.
//
//	go test -run '^$' -bench APIListFlood -benchtime 500x ./coordinator/
func BenchmarkAPIListFlood(b *testing.B) {
	for _, bc := range []struct {
		name string
		rate float64
	}{{"quota", 0}, {"unlimited", -1}} {
		b.Run(bc.name, func(b *testing.B) { benchListFlood(b, bc.rate) })
	}
}

func benchListFlood(b *testing.B, rate float64) {
	ctx := context.Background()
	ns, nc := natstest.Start(b)
	coord, err := coordinator.New(storetest.Open(b), nc, coordinator.Config{APIRate: rate})
	if err != nil {
		b.Fatal(err)
	}
	if err := coord.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer coord.Stop()
	connect := func() *events.Client {
		c, err := nats.Connect(ns.ClientURL())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		client, err := events.NewClient(c, events.ClientOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return client
	}
	setupClient := connect()
	for i := range 50 {
		if _, err := setupClient.SubmitWait(ctx, fairway.Submission{Group: "a", Task: "big", ID: fmt.Sprintf("big-%d", i), Args: bigArgs(1<<20 - 64)}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := setupClient.SubmitWait(ctx, fairway.Submission{Group: "b", Task: "small", ID: "small"}); err != nil {
		b.Fatal(err)
	}

	floodCtx, stopFlood := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers, refused := 0, 0
	for range 8 {
		client := connect()
		wg.Go(func() {
			for floodCtx.Err() == nil {
				_, _, err := client.ListPage(floodCtx, events.ListRequest{Group: "a", Limit: 1000, Full: true})
				mu.Lock()
				if err == nil {
					answers++
				} else {
					refused++
				}
				mu.Unlock()
			}
		})
	}
	var peak uint64
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-floodCtx.Done():
				return
			case <-tick.C:
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		}
	})

	bClient := connect()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		t0 := time.Now()
		if _, err := bClient.Get(ctx, "b", "small"); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	stopFlood()
	wg.Wait()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "b_get_p50_ms")
	b.ReportMetric(pct(0.99), "b_get_p99_ms")
	b.ReportMetric(float64(peak)/(1<<20), "peak_heap_MiB")
	b.ReportMetric(float64(answers)/elapsed.Seconds(), "a_lists/s")
	b.ReportMetric(float64(refused)/elapsed.Seconds(), "a_refused/s")
}
