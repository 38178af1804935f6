// Prefetch: an executor holds a few jobs beyond its slots, so that a slot
// freed by a short job starts the next one at once instead of waiting for
// a dispatch round trip.

package executor

import (
	"math"
	"time"
)

// ewmaWeight is the weight of a new sample in the running averages.
const ewmaWeight = 0.2

// prefetchTarget is how many jobs to hold beyond the pool now (see
// prefetchFor). Called with e.mu held.
func (e *Executor) prefetchTarget() int {
	target, _ := e.prefetch(time.Now())
	return target
}

// prefetch is how many jobs to hold beyond the pool now, and how long a
// request for them may wait at the leader: enough to keep every slot busy
// until the next dispatch reply, sized from the measured run time of jobs
// and dispatch round trip and from how long the running jobs have run, at
// most prefetchMax. Long jobs (or no measurement yet) get none: a job held
// here waits for a slot that will not free soon, while another executor
// may be idle; and a slot whose job has run more than twice as long as
// jobs do counts as one that will not free soon (after many short jobs, a
// long one is not followed by held jobs). The wait is until the last
// running job turns long so: a request held past it would bring a job to
// wait behind jobs that run long. Called with e.mu held.
func (e *Executor) prefetch(now time.Time) (int, time.Duration) {
	if e.prefetchMax <= 0 || e.avgRun <= 0 || e.avgRTT <= 0 {
		return 0, 0
	}
	// The slots free, and those whose job has run no longer than twice the
	// average run time: those a held job may expect to start in.
	soon := max(e.pool-e.runningN, 0)
	long := int64(2 * e.avgRun)
	var until int64
	for _, rj := range e.jobs {
		if !rj.holdsSlot {
			continue
		}
		left := long // not started yet: it starts now
		if ns := rj.startedNS.Load(); ns != 0 {
			left = long - (now.UnixNano() - ns)
		}
		if left >= 0 {
			soon++
		}
		until = max(until, left)
	}
	// What those slots finish during two round trips (a request asks for
	// what was free when it left, and its reply comes a round trip later,
	// while the next request is on its way). Less than half a job: none,
	// so jobs that run much longer than a round trip are taken one per
	// free slot, in the claims' fair order.
	want := 2 * float64(min(soon, e.pool)) * e.avgRTT / e.avgRun
	if want < 0.5 {
		return 0, 0
	}
	return int(min(math.Ceil(want), float64(e.prefetchMax))), time.Duration(until)
}

// heldWait is how long a job held beyond the pool waits for a slot before
// it is handed back for another executor: four times the average run
// time (two round trips at least), and at least heldWaitMin. Called with
// e.mu held.
func (e *Executor) heldWait() time.Duration {
	return max(time.Duration(4*e.avgRun), time.Duration(2*e.avgRTT), heldWaitMin)
}

// heldWaitMin is the least a held job waits for a slot before it goes
// back (heldWait): far beyond a short job's run, so that only a slot held
// by a job that runs long makes it go.
const heldWaitMin = time.Second

// observeRun adds the run time of a handler to the average.
func (e *Executor) observeRun(d time.Duration) {
	e.mu.Lock()
	e.avgRun = ewma(e.avgRun, float64(d))
	e.mu.Unlock()
}

// observeRTT adds the round trip of a dispatch request to the average: one
// that followed a reply that filled every slot asked for (so work was
// waiting, and the coordinator answered at once rather than holding the
// request in a long poll).
func (e *Executor) observeRTT(d time.Duration) {
	e.mu.Lock()
	e.avgRTT = ewma(e.avgRTT, float64(d))
	e.mu.Unlock()
}

func ewma(avg, sample float64) float64 {
	if avg == 0 {
		return sample
	}
	return avg + ewmaWeight*(sample-avg)
}

// takeSlot gives rj one of the pool's slots if one is free and no job
// waits for one, else puts it in line: jobs run in the order dispatch
// replies handed them over. Called with e.mu held, as rj is accepted.
func (e *Executor) takeSlot(rj *runningJob) {
	if e.runningN < e.pool && len(e.queued) == 0 {
		e.runningN++
		rj.holdsSlot = true
		return
	}
	rj.gate = make(chan struct{})
	e.queued = append(e.queued, rj)
}

// waitForSlot waits until rj holds a slot (see takeSlot). It returns false
// when rj's context ended first (cancelled, or released at shutdown or
// pause): rj never ran.
func (e *Executor) waitForSlot(rj *runningJob) bool {
	e.mu.Lock()
	if rj.holdsSlot {
		e.mu.Unlock()
		return true
	}
	gate := rj.gate
	rj.heldFor = e.heldWait()
	e.mu.Unlock()
	held := time.NewTimer(rj.heldFor)
	defer held.Stop()
	select {
	case <-gate:
		return true
	case <-rj.ctx.Done():
	case <-held.C:
		// Its slot does not free: back to waiting, for another executor.
		rj.cancel(errHeldTooLong)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if rj.holdsSlot { // the slot came as the context ended: give it on
		rj.holdsSlot = false
		e.runningN--
		e.startQueued()
		return false
	}
	e.leaveLine(rj)
	return false
}

// leaveLine removes rj from the jobs waiting for a slot, if it is there.
// Called with e.mu held.
func (e *Executor) leaveLine(rj *runningJob) {
	for i, q := range e.queued {
		if q == rj {
			e.queued = append(e.queued[:i], e.queued[i+1:]...)
			return
		}
	}
}

// freeSlot gives rj's slot, if it holds one, to the next job waiting; a
// job that ends while waiting for one (no handler, say) leaves the line.
// Called with e.mu held, as rj ends.
func (e *Executor) freeSlot(rj *runningJob) {
	if !rj.holdsSlot {
		e.leaveLine(rj)
		return
	}
	rj.holdsSlot = false
	e.runningN--
	e.startQueued()
}

// startQueued starts the waiting jobs the pool has room for. Called with
// e.mu held.
func (e *Executor) startQueued() {
	for e.runningN < e.pool && len(e.queued) > 0 {
		rj := e.queued[0]
		e.queued[0] = nil
		e.queued = e.queued[1:]
		e.runningN++
		rj.holdsSlot = true
		close(rj.gate)
	}
}

// releaseQueued hands back the jobs waiting for a slot that match, without
// running them (cause: errShutdown or errPaused): they go back to waiting
// for any executor, no attempt counted.
func (e *Executor) releaseQueued(match func(*runningJob) bool, cause error) {
	e.mu.Lock()
	var release []*runningJob
	for _, rj := range e.queued {
		if match(rj) {
			release = append(release, rj)
		}
	}
	e.mu.Unlock()
	for _, rj := range release {
		rj.cancel(cause)
	}
}
