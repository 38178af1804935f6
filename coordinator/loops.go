package coordinator

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Intervals of the background loops.
const (
	outboxPollInterval = time.Second // fallback when no change kicked the publisher
	outboxBatch        = 1000
	sweepInterval      = time.Second
	sweepBatch         = 1000
)

// publishLoop moves events from the PostgreSQL outbox to JetStream.
func (c *Coordinator) publishLoop(ctx context.Context) {
	ticker := time.NewTicker(outboxPollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.outboxKick:
		case <-ticker.C:
		}
		for {
			n, err := c.store.PublishEvents(ctx, outboxBatch, func(evs []store.Event) error { return c.publishEvents(ctx, evs) })
			if err != nil {
				if ctx.Err() == nil {
					c.log.Warn("publishing events; will retry", "error", err)
				}
				break
			}
			if n < outboxBatch {
				break
			}
		}
	}
}

// publishEvents publishes asynchronously and waits for every ack. By
// default events go in batches (see batchEvents): one message per subject
// and level, a JSON array; with Config.EventPerMessage one message per
// event. Each message carries a Nats-Msg-Id made of its events' ids, so
// a retry after a partial failure does not duplicate within JetStream's
// window.
//
// What a tenant or an executor sent is capped in an event (ids, names and
// error text, see capEvent), so an event is a few KiB at most. A message
// that JetStream still refuses (larger than max_payload or the stream's
// message size, say) must not wedge the outbox for every tenant: it goes
// to the dead-letter stream, with a warning, and counts as published.
func (c *Coordinator) publishEvents(ctx context.Context, evs []store.Event) error {
	msgs, members, err := c.eventMessages(evs)
	if err != nil {
		return err
	}
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, msg := range msgs {
		f, err := c.js.PublishMsgAsync(msg)
		if errors.Is(err, nats.ErrMaxPayload) {
			c.deadEvents(ctx, evs, members[i], msg, err)
			continue
		}
		if err != nil {
			return fmt.Errorf("publishing events on %s: %w", msg.Subject, err)
		}
		futures[i] = f
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) {
				// JetStream refused this message: it would refuse it again.
				c.deadEvents(ctx, evs, members[i], msgs[i], err)
				continue
			}
			return fmt.Errorf("publishing events: %w", err)
		case <-timeout.C:
			return fmt.Errorf("publishing %d events in %d messages: no ack from JetStream within 10s", len(evs), len(msgs))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.metrics.published(evs)
	return nil
}

// eventMessages encodes outbox events as messages, and returns with each
// the indexes of its events.
func (c *Coordinator) eventMessages(evs []store.Event) ([]*nats.Msg, [][]int, error) {
	subject := func(e store.Event) string { return c.subjects.Event(e.Group, e.Task, e.State) }
	if c.cfg.EventPerMessage {
		msgs := make([]*nats.Msg, len(evs))
		members := make([][]int, len(evs))
		for i, e := range evs {
			data, err := encodeEvent(e)
			if err != nil {
				return nil, nil, err
			}
			msgs[i] = &nats.Msg{Subject: subject(e), Data: data, Header: nats.Header{jetstream.MsgIDHeader: {e.ID}}}
			members[i] = []int{i}
		}
		return msgs, members, nil
	}
	batches, err := batchEvents(evs, subject, appendEvent)
	if err != nil {
		return nil, nil, err
	}
	msgs := make([]*nats.Msg, len(batches))
	members := make([][]int, len(batches))
	for i, b := range batches {
		msgs[i] = &nats.Msg{Subject: b.subject, Data: b.data, Header: nats.Header{jetstream.MsgIDHeader: {b.id(evs)}}}
		members[i] = b.events
	}
	return msgs, members, nil
}

// deadEvents moves a message of events JetStream refuses to the
// dead-letter stream. Should that fail too, the events are dropped: the
// outbox must flow.
func (c *Coordinator) deadEvents(ctx context.Context, evs []store.Event, members []int, msg *nats.Msg, cause error) {
	dm := events.DeadLetterMsg(c.subjects, events.DeadEvent, msg.Subject, "JetStream refused the event: "+cause.Error(), 1, msg.Data, c.nc.MaxPayload())
	_, err := c.js.PublishMsg(ctx, dm)
	if err == nil {
		c.metrics.deadLetters.WithLabelValues(events.DeadEvent).Inc()
	}
	first := evs[members[0]]
	c.log.Warn("a message of events JetStream refuses was moved to the dead-letter stream and removed from the outbox",
		"event_id", first.ID, "events", len(members), "job_id", fairway.TruncateRunes(first.JobID, fairway.MaxIDLength), "subject", msg.Subject, "size", len(msg.Data),
		"error", cause, "dead_letter_error", err)
}

// sweepLoop recovers the jobs of executors that died or lost their
// connection: when a lease runs out the attempt counts as failed and the job
// is due again at once. It also marks gone the executors silent for
// several leases.
//
// Leases are only expired, and executors marked gone, once PostgreSQL has
// been reachable for a whole lease: heartbeats sent while it was down (or before this coordinator
// started) were not recorded, and the executors' next ones must have a
// chance to renew their leases before they are judged lost.
func (c *Coordinator) sweepLoop(ctx context.Context) {
	ticker := time.NewTicker(sweepInterval)
	defer ticker.Stop()
	reachableSince := time.Now()
	var downSince time.Time // zero while PostgreSQL answers
	unreachable := func(err error) {
		if downSince.IsZero() && ctx.Err() == nil {
			downSince = time.Now()
			c.log.Warn("PostgreSQL unreachable: submissions and reports wait in JetStream; leases are not expired until it has been back for a lease", "error", err)
		}
		reachableSince = time.Now()
	}
	reachable := func() {
		if !downSince.IsZero() {
			c.log.Warn("PostgreSQL reachable again", "outage", time.Since(downSince).Round(time.Millisecond).String())
			downSince = time.Time{}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if !c.lead.leads.Load() {
			// Another coordinator runs the maintenance; whether PostgreSQL
			// answers is known from the lead's renewal.
			if err := c.lead.lastErr(); err != nil {
				unreachable(err)
			} else {
				reachable()
			}
			continue
		}
		if time.Since(reachableSince) < c.cfg.Lease {
			if err := c.store.Ping(ctx); err != nil {
				unreachable(err)
			} else {
				reachable()
				c.timedChanges(ctx)
			}
			continue
		}
		applied, err := c.store.ExpireLeases(ctx, sweepBatch, c.cfg.Lease, c.cfg.RetryDelay)
		if err != nil {
			unreachable(err)
			continue
		}
		reachable()
		c.timedChanges(ctx)
		c.markGone(ctx)
		if len(applied) > 0 {
			states := map[string]int{}
			for _, a := range applied {
				states[string(a.State)]++
			}
			c.log.Warn("leases expired: jobs of lost executors released", "jobs", len(applied), "states", states)
			c.afterChange(applied)
		}
	}
}

// timedChanges releases the pending jobs whose trigger time has come and
// fails the jobs that expired before they started.
func (c *Coordinator) timedChanges(ctx context.Context) {
	triggered, err := c.store.TriggerPending(ctx, sweepBatch)
	if err != nil {
		c.log.Warn("releasing triggered pending jobs", "error", err)
	} else if len(triggered) > 0 {
		c.log.Info("pending jobs released: their trigger time came", "jobs", len(triggered))
		c.afterChange(triggered)
	}
	expired, err := c.store.ExpireJobs(ctx, sweepBatch)
	if err != nil {
		c.log.Warn("expiring jobs", "error", err)
	} else if len(expired) > 0 {
		c.log.Info("jobs expired before they started", "jobs", len(expired))
		c.afterChange(expired)
	}
}

// dueLoop wakes the executors when a delayed job or a retry becomes due,
// so they need not poll for it.
func (c *Coordinator) dueLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, ok := c.due.next()
		wait := time.Hour
		if ok {
			wait = max(time.Until(next), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-c.due.changed:
		case <-timer.C:
			if c.due.popDue(c.hostNow()) {
				c.notifyWork()
			}
		}
	}
}

// dueTimesCap bounds the remembered due times; beyond it the executors'
// wakeup period catches the rest.
const dueTimesCap = 100_000

// dueTimes is a min-heap of times at which jobs become due.
type dueTimes struct {
	mu      sync.Mutex
	h       timeHeap
	changed chan struct{}
}

func newDueTimes() *dueTimes { return &dueTimes{changed: make(chan struct{}, 1)} }

func (d *dueTimes) add(t time.Time) {
	d.mu.Lock()
	if d.h.Len() < dueTimesCap {
		heap.Push(&d.h, t)
	}
	d.mu.Unlock()
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

func (d *dueTimes) next() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.h.Len() == 0 {
		return time.Time{}, false
	}
	return d.h[0], true
}

// popDue removes the times up to now and says whether there were any.
func (d *dueTimes) popDue(now time.Time) bool {
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
func (d *dueTimes) load(ctx context.Context, st *store.Store) error {
	times, err := st.FutureDueTimes(ctx, dueTimesCap)
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
