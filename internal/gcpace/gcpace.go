// Package gcpace bounds how far Go's garbage collector lets a process's
// heap grow past what it holds: by the live heap (GOGC=100, Go's default)
// while that is small, by a fixed headroom once it is larger. A journal
// leader holds a million waiting jobs in about 220 MiB of live heap; at
// GOGC=100 the heap grows to twice that between collections, and the
// process to 500 MiB and more, where issue 31 allows 400 (condition 6).
// Past the headroom a collection comes sooner, costing CPU in proportion
// to the allocations, not to the state held; a small heap, as in a drain,
// is paced as before.
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
// headroom is still collected at a bounded pace.
const minPercent = 10

// Percent is the GOGC that lets a live heap of live bytes grow by at most
// headroom bytes, and by no more than itself (100).
func Percent(live, headroom uint64) int {
	if headroom == 0 || live <= headroom {
		return 100
	}
	return max(minPercent, int(100*headroom/live)) //nolint:gosec // G115: below 100
}

// Keep sets GOGC to Percent of the live heap every interval until ctx
// ends, when it puts GOGC back. It does nothing when headroom is 0 or the
// process's GOGC is set by its environment (GOGC wins, as GOMEMLIMIT wins
// over coordinator.memory-limit).
func Keep(ctx context.Context, headroom uint64, interval time.Duration) {
	if _, set := os.LookupEnv("GOGC"); set || headroom == 0 {
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
			if p := Percent(sample[0].Value.Uint64(), headroom); p*10 < current*9 || p*10 > current*11 {
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
