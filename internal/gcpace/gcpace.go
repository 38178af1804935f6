// Package gcpace sets how far Go's garbage collector lets a process's heap
// grow past what it holds: to a floor while the live heap is small, by the
// live heap (GOGC=100, Go's default) past that, and by a fixed headroom
// once it is larger. A journal leader holds a million waiting jobs in
// about 220 MiB of live heap; at GOGC=100 the heap grows to twice that
// between collections, and the process to 500 MiB and more, where issue 31
// allows 400 (condition 6). Past the headroom a collection comes sooner,
// costing CPU in proportion to the allocations, not to the state held. A
// drain holds 30–60 MiB and allocates fast: at GOGC=100 it collected so
// often that the collector cost the coordinator a fifth to a quarter of its CPU
// (docs/performance.md, "2026-11-30, fifth session"); up to the floor, a
// collection comes only once the heap reaches it.
package gcpace

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// liveMetric is the heap that the last collection found live.
const liveMetric = "/gc/heap/live:bytes"

// minPercent is the least GOGC Keep sets: a live heap far above the
// headroom is still collected at a bounded pace. maxPercent is the most:
// a nearly empty heap is not left to grow to the floor before its first
// collection (a live heap of 10 MiB: 110 MiB at most).
const (
	minPercent = 10
	maxPercent = 1000
)

// Percent is the GOGC that lets a live heap of live bytes grow to floor
// bytes, and past that by itself (100) up to headroom bytes, by headroom
// bytes beyond. headroom 0: no bound past the floor.
func Percent(live, headroom, floor uint64) int {
	if live == 0 {
		return 100
	}
	growth := live
	if headroom > 0 {
		growth = min(live, headroom)
	}
	goal := max(live+growth, floor)
	return min(max(minPercent, int(100*(goal-live)/live)), maxPercent) //nolint:gosec // G115: bounded above
}

// Keep sets GOGC to Percent of the live heap every interval until ctx
// ends, when it puts GOGC back. It does nothing when headroom and floor
// are both 0 or the process's GOGC is set by its environment (GOGC wins,
// as GOMEMLIMIT wins over coordinator.memory-limit).
func Keep(ctx context.Context, headroom, floor uint64, interval time.Duration) {
	if _, set := os.LookupEnv("GOGC"); set || (headroom == 0 && floor == 0) {
		return
	}
	sample := []metrics.Sample{{Name: liveMetric}}
	current := 100
	defer func() { debug.SetGCPercent(100) }()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			// Set only when it moves by a tenth or more: each setting
			// recomputes the collector's goal.
			if p := Percent(sample[0].Value.Uint64(), headroom, floor); p*10 < current*9 || p*10 > current*11 {
				debug.SetGCPercent(p)
				current = p
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
