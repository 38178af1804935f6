// Package floodbench is the list flood that the flood benchmarks share
// (BenchmarkAPIListFlood in coordinator/, in one process, and
// BenchmarkListFloodProcesses in internal/chaos/, with real processes):
// tenant A holds 50 jobs of 1 MiB args and floods `list` with them; tenant
// B gets a small job meanwhile.
package floodbench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// Store submits tenant A's 50 jobs of 1 MiB args (group "a") and tenant
// B's small job (group "b", id "small").
func Store(b *testing.B, client *events.Client) {
	b.Helper()
	ctx := b.Context()
	if _, err := client.SubmitWait(ctx, fairway.Submission{Group: "b", Task: "small", ID: "small"}); err != nil {
		b.Fatal(err)
	}
	args := []byte(`{"pad":"` + strings.Repeat("x", 1<<20-64) + `"}`)
	for i := range 50 {
		if _, err := client.SubmitWait(ctx, fairway.Submission{Group: "a", Task: "big", ID: fmt.Sprintf("big-%d", i), Args: args}); err != nil {
			b.Fatal(err)
		}
	}
}

// Run has A's clients ask, as fast as they are answered, for list limit
// 1000 with args, and B get its job b.N times, one request every 20 ms
// (within its own rate quota). It samples memory (MiB) every 20 ms during
// the flood and reports B's p50 and p99, the peak sample as memUnit, and
// A's answers and refusals per second. The flood stops when Run returns,
// also when the benchmark fails.
func Run(b *testing.B, flooders []*events.Client, bClient *events.Client, memMiB func() float64, memUnit string) {
	b.Helper()
	ctx := b.Context()
	floodCtx, stopFlood := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopFlood()
	var mu sync.Mutex
	answers, refused := 0, 0
	flowing := make(chan struct{}) // closed at A's 8th answer: the flood is on
	var once sync.Once
	for _, client := range flooders {
		wg.Go(func() {
			for floodCtx.Err() == nil {
				_, _, err := client.ListPage(floodCtx, events.ListRequest{Group: "a", Limit: 1000, Full: true})
				mu.Lock()
				if err == nil {
					answers++
					if answers == 8 {
						once.Do(func() { close(flowing) })
					}
				} else {
					refused++
				}
				mu.Unlock()
			}
		})
	}
	var peak float64
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-floodCtx.Done():
				return
			case <-tick.C:
				peak = max(peak, memMiB())
			}
		}
	})
	if len(flooders) > 0 {
		select {
		case <-flowing:
		case <-time.After(time.Minute):
			b.Fatal("tenant A's flood got no 8 answers within a minute")
		}
	}
	mu.Lock()
	answers, refused = 0, 0
	mu.Unlock()
	lat := make([]time.Duration, 0, b.N)
	pace := time.NewTicker(20 * time.Millisecond)
	defer pace.Stop()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		<-pace.C
		t0 := time.Now()
		if _, err := bClient.Get(ctx, "b", "small"); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	mu.Lock()
	lists, refusals := answers, refused
	mu.Unlock()
	stopFlood()
	wg.Wait()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "b_get_p50_ms")
	b.ReportMetric(pct(0.99), "b_get_p99_ms")
	b.ReportMetric(peak, memUnit)
	b.ReportMetric(float64(lists)/elapsed.Seconds(), "a_lists/s")
	b.ReportMetric(float64(refusals)/elapsed.Seconds(), "a_refused/s")
}
