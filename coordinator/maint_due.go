package coordinator

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Defaults of dueConfig.
const (
	// dueTimesCap bounds the remembered due times; beyond it the executors'
	// wakeup period catches the rest.
	dueTimesCap = 100_000
	// dueIdleWait is how long the loop sleeps while it knows no due time:
	// a time added wakes it before.
	dueIdleWait = time.Hour
)

// dueConfig configures the due timers.
type dueConfig struct {
	// Cap bounds the remembered due times. Defaults to dueTimesCap.
	Cap int
	// IdleWait is how long the loop sleeps while it knows no due time.
	// Defaults to dueIdleWait.
	IdleWait time.Duration
}

func (c dueConfig) withDefaults() dueConfig {
	if c.Cap <= 0 {
		c.Cap = dueTimesCap
	}
	if c.IdleWait <= 0 {
		c.IdleWait = dueIdleWait
	}
	return c
}

// dueTimers wakes the executors when a delayed job or a retry becomes due,
// so they need not poll for it. It remembers the times at which jobs
// become due (a min-heap): those read at start (load) and those that
// changes on this coordinator set (add). Every coordinator runs one, since
// each learns of its own changes' due times.
type dueTimers struct {
	cfg dueConfig
	serviceBase
	// now is the host clock (Coordinator.hostNow) that says which times
	// have come.
	now func() time.Time
	// notifyWork wakes idle executors (dispatcher.notifyWork).
	notifyWork func()

	mu      sync.Mutex
	h       timeHeap
	changed chan struct{}
}

func newDueTimers(cfg dueConfig, b serviceBase, now func() time.Time, notifyWork func()) *dueTimers {
	return &dueTimers{cfg: cfg.withDefaults(), serviceBase: b, now: now, notifyWork: notifyWork, changed: make(chan struct{}, 1)}
}

// run wakes the executors at each due time until ctx ends.
func (d *dueTimers) run(ctx context.Context) {
	timer := time.NewTimer(d.cfg.IdleWait)
	defer timer.Stop()
	for {
		next, ok := d.next()
		wait := d.cfg.IdleWait
		if ok {
			wait = max(time.Until(next), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-d.changed:
		case <-timer.C:
			if d.popDue(d.now()) {
				d.notifyWork()
			}
		}
	}
}

// add remembers that a job becomes due at t.
func (d *dueTimers) add(t time.Time) {
	d.mu.Lock()
	if d.h.Len() < d.cfg.Cap {
		heap.Push(&d.h, t)
	}
	d.mu.Unlock()
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

func (d *dueTimers) next() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.h.Len() == 0 {
		return time.Time{}, false
	}
	return d.h[0], true
}

// popDue removes the times up to now and says whether there were any.
func (d *dueTimers) popDue(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	popped := false
	for d.h.Len() > 0 && !d.h[0].After(now) {
		heap.Pop(&d.h)
		popped = true
	}
	return popped
}

// load reads the due times of the jobs not yet due, at start.
func (d *dueTimers) load(ctx context.Context) error {
	times, err := d.store.FutureDueTimes(ctx, d.cfg.Cap)
	if err != nil {
		return err
	}
	for _, t := range times {
		d.add(t)
	}
	return nil
}

type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
