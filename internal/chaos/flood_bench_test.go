package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/floodbench"
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
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			b.Logf("removing %s: %v", dir, err)
		}
	}()
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
	// The coordinator answers once it has migrated and made its streams.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := setup.Executors(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the coordinator did not answer within a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	floodbench.Store(b, setup)
	pid := c.Coordinators[0].Pid()
	flooders := make([]*events.Client, clients)
	for i := range flooders {
		flooders[i] = connect()
	}
	rssMiB := func() float64 { return float64(procStatusKiB(pid, "VmRSS")) / 1024 }
	floodbench.Run(b, flooders, connect(), rssMiB, "coord_rss_MiB")
	b.ReportMetric(float64(procStatusKiB(pid, "VmHWM"))/1024, "coord_hwm_MiB")
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
