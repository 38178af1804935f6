package executor

import "time"

// SetPrefetchEstimates sets the measured averages the prefetch target
// follows (a job's run time and a dispatch round trip), for a test whose
// subject is what the executor does with the jobs it holds, not how many
// it decides to hold: on a loaded machine a job the test keeps running
// for a while makes jobs look long, and the executor then holds none.
func (e *Executor) SetPrefetchEstimates(run, rtt time.Duration) {
	e.mu.Lock()
	e.avgRun, e.avgRTT = float64(run), float64(rtt)
	e.mu.Unlock()
}

// PrefetchTarget is how many jobs the executor would hold beyond its pool
// now (prefetchTarget).
func (e *Executor) PrefetchTarget() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.prefetchTarget()
}

// SetDispatchBackoff sets the pause after a failed dispatch, before
// Start: a test that must see what ends it sooner.
func (e *Executor) SetDispatchBackoff(d time.Duration) { e.backoff = d }
