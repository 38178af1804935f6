package coordinator_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/floodbench"
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
	coord, err := coordinator.New(storetest.Public(storetest.Open(b)), nc, coordinator.Config{APIRate: rate, APIGroupWorkers: groupWorkers})
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
	floodbench.Store(b, connect())
	flooders := make([]*events.Client, clients)
	for i := range flooders {
		flooders[i] = connect()
	}
	heapMiB := func() float64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapInuse) / (1 << 20)
	}
	floodbench.Run(b, flooders, connect(), heapMiB, "peak_heap_MiB")
}
