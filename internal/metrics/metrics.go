// Package metrics holds what Fairway's Prometheus metrics share: the
// registration of a collector that another component of the same process
// may have registered already, and the histogram buckets.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// BatchBuckets count the items of a batch (1 … 10,000).
var BatchBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}

// TimeBuckets are the seconds of a database round trip or a batch (0.25 ms
// … 10 s).
var TimeBuckets = []float64{0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// JobBuckets are the seconds a job waits or runs (1 ms … 1 h).
var JobBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// Register registers c with reg and returns it; when reg already holds a
// collector of the same description (two coordinators, or a coordinator
// and an executor sharing a process), it returns that one, so that both
// count into it. A nil reg keeps c unexposed.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if errors.As(err, &dup) {
			if existing, ok := dup.ExistingCollector.(T); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("metrics: registering: %v", err))
	}
	return c
}
