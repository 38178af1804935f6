package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
)

// BenchmarkListFloodProcesses is BenchmarkAPIListFlood (coordinator/) with
// real processes, so that the coordinator's own memory can be read: a
// nats-server process and a `fairway coordinator` process on a throwaway
// PostgreSQL. Tenant A holds 50 jobs of 1 MiB args, and 8 of its clients
// ask, as fast as they are answered, for list limit 1000 with args; tenant
// B gets one small job b.N times, one request every 20 ms (within its own
// rate quota). It reports B's
// get p50 and p99, the coordinator's resident set (peak of samples every
// 20 ms during the flood, and VmHWM, its peak since it started, setup
// included), and A's answers and refusals per second. "quota" runs with
// the defaults (API rate 100/s, burst 200, one request per group at a
// time), "unlimited" with coordinator.quota.api-rate 0, "idle" without A.
//
//	go test -run '^$' -bench ListFloodProcesses -benchtime 300x ./internal/chaos/
func BenchmarkListFloodProcesses(b *testing.B) {
	dir, err := os.MkdirTemp("", "fairway-flood-")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // PostgreSQL runs as postgres under root
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	bin, err := Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		b.Fatal(err)
	}
	pg, err := StartPG(ctx, filepath.Join(dir, "postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pg.Stop() }()
	runs := 0
	for _, bc := range []struct {
		name    string
		env     []string
		clients int
	}{
		{"idle", nil, 0},
		{"quota", nil, 8},
		{"unlimited", []string{"FAIRWAY_COORDINATOR_QUOTA_API_RATE=0"}, 8},
	} {
		b.Run(bc.name, func(b *testing.B) {
			runs++
			run := fmt.Sprintf("%s-%d", bc.name, runs)
			dbURL, err := pg.NewDatabase(ctx, "flood_"+strings.ReplaceAll(run, "-", "_"))
			if err != nil {
				b.Fatal(err)
			}
			c, err := NewCluster(ctx, bin, filepath.Join(dir, run), dbURL, ClusterOptions{NATSNodes: 1,
				Coordinator: func(int) ProcOptions { return ProcOptions{Env: bc.env} }, Coordinators: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			benchFloodProcess(b, c, bc.clients)
		})
	}
}

func benchFloodProcess(b *testing.B, c *Cluster, clients int) {
	ctx := context.Background()
	connect := func() *events.Client {
		nc, err := nats.Connect(c.NATSURL(""), nats.MaxReconnects(-1))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		client, err := events.NewClient(nc, events.ClientOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return client
	}
	setup := connect()
	// The coordinator answers once its streams exist: wait for its first answer.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := setup.SubmitWait(ctx, fairway.Submission{Group: "b", Task: "small", ID: "small"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the coordinator did not answer within a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	args := []byte(`{"pad":"` + strings.Repeat("x", 1<<20-64) + `"}`)
	for i := range 50 {
		if _, err := setup.SubmitWait(ctx, fairway.Submission{Group: "a", Task: "big", ID: fmt.Sprintf("big-%d", i), Args: args}); err != nil {
			b.Fatal(err)
		}
	}
	pid := c.Coordinators[0].Pid()

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
	var peak int64
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-floodCtx.Done():
				return
			case <-tick.C:
				peak = max(peak, procStatusKiB(pid, "VmRSS"))
			}
		}
	})
	if clients > 0 {
		select {
		case <-flowing:
		case <-time.After(time.Minute):
			b.Fatal("tenant A's flood got no 8 answers within a minute")
		}
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
	b.ReportMetric(float64(peak)/1024, "coord_rss_MiB")
	b.ReportMetric(float64(procStatusKiB(pid, "VmHWM"))/1024, "coord_hwm_MiB")
	b.ReportMetric(float64(lists)/elapsed.Seconds(), "a_lists/s")
	b.ReportMetric(float64(refusals)/elapsed.Seconds(), "a_refused/s")
}

// procStatusKiB reads a "kB" field of /proc/PID/status (VmRSS, VmHWM), or
// 0 when it cannot.
func procStatusKiB(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(data) {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok || string(name) != field {
			continue
		}
		v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(rest)), " kB"), 10, 64)
		return v
	}
	return 0
}
