package coordinator

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
)

// apiPool runs API requests on a bounded number of workers, fairly between
// groups. Each group has a lane: a queue of its requests waiting and a
// count of those running. Workers take the next request round-robin over
// the lanes that may run one, so a group with a hundred requests waiting
// does not delay another's single one. A lane runs at most perGroup
// requests at once (a group's slow or large requests cannot take every
// worker, nor the CPU and memory of many at once) and queues at most
// perGroupQueue requests and perGroupBytes of them: a request beyond that
// is refused with quota. All lanes together queue at most queue requests
// and queueBytes: beyond that a request is refused with unavailable at
// once rather than waiting. The
// operator API has lanes of its own: the operator's (""), and one per
// lane a request may name (events.LaneHeader), such as a web server's
// read-only users'.
type apiPool struct {
	perGroup      int
	perGroupQueue int
	queue         int
	// perGroupBytes and queueBytes bound the bytes of the requests waiting
	// (a lane's, every lane's): a lane with none waiting takes one of any
	// size.
	perGroupBytes, queueBytes int
	// lane names what a lane is in refusals: "group" (the default), or
	// "executor" for the executor protocol's pool.
	lane string

	mu     sync.Mutex
	cond   *sync.Cond
	lanes  map[string]*apiLane
	ready  []*apiLane // lanes with a request waiting and room to run it, in turn
	queued int
	bytes  int // of the requests waiting
	closed bool
}

type apiLane struct {
	group   string
	waiting []queuedTask
	bytes   int // of its requests waiting
	running int
	isReady bool // in ready
}

// queuedTask is a request waiting, with its size.
type queuedTask struct {
	run  func()
	size int
}

// Bounds of the bytes of the requests waiting in a pool.
const (
	apiLaneBytes  = 16 << 20
	apiQueueBytes = 64 << 20
)

func newAPIPool(workers, perGroup, queue int) *apiPool {
	p := &apiPool{
		perGroup:      perGroup,
		perGroupQueue: max(1, queue/8),
		queue:         queue,
		perGroupBytes: apiLaneBytes,
		queueBytes:    apiQueueBytes,
		lanes:         map[string]*apiLane{},
	}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// add queues task, a request of size bytes, for group's lane, or refuses
// it: quota when the group has its share of the queue waiting (in
// requests or bytes), unavailable when the queue is full or the pool
// stopped.
func (p *apiPool) add(group string, size int, task func()) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return &fairway.Error{Code: fairway.CodeUnavailable, Message: "coordinator stopping"}
	}
	l := p.lanes[group]
	if l == nil {
		l = &apiLane{group: group}
		p.lanes[group] = l
	}
	switch {
	case len(l.waiting) >= p.perGroupQueue || l.bytes > 0 && l.bytes+size > p.perGroupBytes:
		lane, name := cmp.Or(p.lane, "group"), group
		if p.lane == "" && (group == "" || strings.HasPrefix(group, operatorLanePrefix)) {
			lane, name = "operator API lane", cmp.Or(strings.TrimPrefix(group, operatorLanePrefix), "operator")
		}
		return &fairway.Error{Code: fairway.CodeQuota, Field: cmp.Or(p.lane, "group"),
			Message: fmt.Sprintf("%s %q has %d requests (%d KiB) waiting and %d running on this coordinator, its share (at most %d waiting, %d MiB, %d running): retry when your earlier requests are answered",
				lane, name, len(l.waiting), l.bytes>>10, l.running, p.perGroupQueue, p.perGroupBytes>>20, p.perGroup)}
	case p.queued >= p.queue || p.bytes > 0 && p.bytes+size > p.queueBytes:
		return &fairway.Error{Code: fairway.CodeUnavailable,
			Message: fmt.Sprintf("coordinator busy: %d requests (%d KiB) waiting (coordinator.api-queue for the API, %d MiB in all); retry shortly", p.queued, p.bytes>>10, p.queueBytes>>20)}
	}
	l.waiting = append(l.waiting, queuedTask{run: task, size: size})
	l.bytes += size
	p.bytes += size
	p.queued++
	p.makeReady(l)
	return nil
}

// makeReady puts l in turn if it has a request waiting and room to run it.
func (p *apiPool) makeReady(l *apiLane) {
	if !l.isReady && len(l.waiting) > 0 && l.running < p.perGroup {
		l.isReady = true
		p.ready = append(p.ready, l)
		p.cond.Signal()
	}
}

// work runs requests until the pool is closed.
func (p *apiPool) work() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for len(p.ready) == 0 && !p.closed {
			p.cond.Wait()
		}
		if p.closed {
			return
		}
		l := p.ready[0]
		p.ready = p.ready[1:]
		l.isReady = false
		task := l.waiting[0]
		l.waiting[0] = queuedTask{}
		l.waiting = l.waiting[1:]
		l.bytes -= task.size
		p.bytes -= task.size
		l.running++
		p.queued--
		p.makeReady(l) // back of the line: round-robin
		p.mu.Unlock()
		task.run()
		p.mu.Lock()
		l.running--
		p.makeReady(l)
		if l.running == 0 && len(l.waiting) == 0 {
			delete(p.lanes, l.group)
		}
	}
}

// close stops the workers once their requests are done, and returns the
// requests still waiting, for the caller to answer.
func (p *apiPool) close() []func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.cond.Broadcast()
	var left []func()
	for _, l := range p.lanes {
		for _, task := range l.waiting {
			left = append(left, task.run)
		}
		l.waiting, l.bytes = nil, 0
	}
	p.ready, p.queued, p.bytes = nil, 0, 0
	return left
}

// rateLimiter is a token bucket per group: rate requests per second, up to
// burst at once. A rate ≤ 0 allows everything.
type rateLimiter struct {
	rate  float64
	burst float64

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// maxIdleBuckets bounds the buckets kept: beyond it, full ones (of groups
// idle long enough to have refilled) are dropped, which changes nothing.
const maxIdleBuckets = 4096

func newRateLimiter(rate float64, burst int) *rateLimiter {
	return &rateLimiter{rate: rate, burst: float64(max(burst, 1)), buckets: map[string]*bucket{}}
}

// allow takes a token of group's bucket, or says how long until one is
// there.
func (r *rateLimiter) allow(group string, now time.Time) (bool, time.Duration) {
	return r.take(group, 1, 1, now)
}

// allowN takes n tokens of group's bucket if it holds at least one, going
// into debt for the rest (a message of many submissions is taken whole, and
// the group waits the longer after it), or says how long until it holds
// one.
func (r *rateLimiter) allowN(group string, n int, now time.Time) (bool, time.Duration) {
	return r.take(group, 1, float64(n), now)
}

// take takes n tokens of group's bucket if it holds need, or says how long
// until it does.
func (r *rateLimiter) take(group string, need, n float64, now time.Time) (bool, time.Duration) {
	if r.rate <= 0 {
		return true, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[group]
	if b == nil {
		if len(r.buckets) >= maxIdleBuckets {
			r.prune(now)
		}
		b = &bucket{tokens: r.burst, at: now}
		r.buckets[group] = b
	}
	b.tokens = math.Min(r.burst, b.tokens+now.Sub(b.at).Seconds()*r.rate)
	b.at = now
	if b.tokens >= need {
		b.tokens -= n
		return true, 0
	}
	wait := time.Duration((need - b.tokens) / r.rate * float64(time.Second))
	return false, max(wait, time.Microsecond) // never "now" while it refuses
}

func (r *rateLimiter) prune(now time.Time) {
	for g, b := range r.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*r.rate >= r.burst {
			delete(r.buckets, g)
		}
	}
}

// quotaError is the refusal of a request over its group's API rate.
func (r *rateLimiter) quotaError(group string, wait time.Duration) *fairway.Error {
	return &fairway.Error{Code: fairway.CodeQuota, Field: "group",
		Message: fmt.Sprintf("group %q is over its API rate quota of %g requests/s (burst %g) on this coordinator (coordinator.quota.api-rate): retry in %s",
			group, r.rate, r.burst, max(wait, time.Millisecond).Round(time.Millisecond).String())}
}
