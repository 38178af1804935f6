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
// job b.N times, one request every 20 ms (within its own rate quota). It
// reports B's p50 and p99, the peak Go heap in use of the process
// (coordinator, NATS server and the clients, which hold A's replies,
// sampled every 20 ms: for the coordinator's own memory see
// BenchmarkListFloodProcesses in internal/chaos), and A's answers.
// "quota" runs with the defaults (rate quota 100/s, burst 200; 16
// workers, one request per group at a time), "unlimited" without the rate
// quota, so that only the worker pool's fair share protects B;
// "a-runs-four" with api-group-workers 4; "idle" without A: B's baseline.
//
//	go test -run '^$' -bench APIListFlood -benchtime 300x ./coordinator/
func BenchmarkAPIListFlood(b *testing.B) {
	for _, bc := range []struct {
		name                  string
		rate                  float64
		groupWorkers, clients int
	}{
		{"idle", -1, 0, 0},
		{"quota", 0, 0, 8},
		{"unlimited", -1, 0, 8},
		{"a-runs-four", -1, 4, 8},
	} {
		b.Run(bc.name, func(b *testing.B) { benchListFlood(b, bc.rate, bc.groupWorkers, bc.clients) })
	}
}

func benchListFlood(b *testing.B, rate float64, groupWorkers, clients int) {
	ctx := context.Background()
	ns, nc := natstest.Start(b)
	coord, err := coordinator.New(storetest.Open(b), nc, coordinator.Config{APIRate: rate, APIGroupWorkers: groupWorkers})
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
	defer wg.Wait()
	defer stopFlood() // also when the benchmark fails
	var mu sync.Mutex
	answers, refused := 0, 0
	flowing := make(chan struct{}) // closed at A's 8th answer: the flood is on
	var once sync.Once
	for range clients {
		client := connect()
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

	if clients > 0 {
		<-flowing
	}
	mu.Lock()
	answers, refused = 0, 0
	mu.Unlock()
	bClient := connect()
	lat := make([]time.Duration, 0, b.N)
	// B stays within its own API rate quota (100/s): one get every 20 ms.
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
	b.ReportMetric(float64(peak)/(1<<20), "peak_heap_MiB")
	b.ReportMetric(float64(lists)/elapsed.Seconds(), "a_lists/s")
	b.ReportMetric(float64(refusals)/elapsed.Seconds(), "a_refused/s")
}
