package coordinator

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// fairQueue holds messages read ahead of a stream's head, a FIFO per key
// (a submission's group), and hands them out round-robin across keys: a
// tenant's burst waits behind itself, not in front of the others. Within
// a key the order is the stream's.
type fairQueue[T any] struct {
	queues map[string][]T
	ring   []string // keys with queued items, in turn order
	next   int      // index in ring of the key whose turn is next
	len    int
	bytes  int
	// weights is the sum of the items' weights (see weight).
	weights int
	// endedEarly says that the last take ended early (see take).
	endedEarly bool
	size       func(T) int
	// weight, when set, is what an item counts for in take's max (the
	// submissions a message carries); else each counts for one.
	weight func(T) int
}

func newFairQueue[T any](size func(T) int) *fairQueue[T] {
	return &fairQueue[T]{queues: map[string][]T{}, size: size}
}

// push queues v under key, behind the key's earlier items. A new key
// takes its turn after every key already waiting.
func (q *fairQueue[T]) push(key string, v T) {
	if len(q.queues[key]) == 0 {
		// Insert just before the key whose turn is next: the new key is
		// served last in the current rotation.
		q.ring = append(q.ring, "")
		copy(q.ring[q.next+1:], q.ring[q.next:])
		q.ring[q.next] = key
		q.next++
		if q.next == len(q.ring) {
			q.next = 0
		}
	}
	q.queues[key] = append(q.queues[key], v)
	q.len++
	q.weights += q.weightOf(v)
	q.bytes += q.size(v)
}

// take removes items weighing up to limit (at least one item), one per key
// in turn, and returns them in that order.
//
// A take also ends early, at the end of a rotation in which a key ran out,
// when what it took weighs at most half of limit and what is left would
// fill the rest: a group with a few submissions among another's burst is
// stored in a small batch of its own, not in a full batch of the burst
// (a full batch is a statement of several milliseconds; see
// TestFairQueueEndsABatchWhereAKeyRunsOut). Never twice in a row: light
// groups that run out at every take, beside a burst, would otherwise make
// every batch small, and ingest as slow as a statement per few messages.
func (q *fairQueue[T]) take(limit int) []T {
	out := make([]T, 0, min(limit, q.len))
	rotation, ranOut := len(q.ring), false // visits left in this rotation
	for taken := 0; taken < limit && q.len > 0; {
		if q.next >= len(q.ring) {
			q.next = 0
		}
		key := q.ring[q.next]
		items := q.queues[key]
		v := items[0]
		var zero T
		items[0] = zero
		items = items[1:]
		out = append(out, v)
		w := q.weightOf(v)
		taken += w
		q.len--
		q.weights -= w
		q.bytes -= q.size(v)
		if len(items) == 0 {
			delete(q.queues, key)
			q.ring = append(q.ring[:q.next], q.ring[q.next+1:]...)
			ranOut = true
		} else {
			q.queues[key] = items
			q.next++
		}
		if rotation--; rotation == 0 {
			if ranOut && !q.endedEarly && 2*taken <= limit && q.weights >= limit-taken {
				q.endedEarly = true
				return out
			}
			rotation, ranOut = len(q.ring), false
		}
	}
	q.endedEarly = false
	return out
}

// weightOf is what v counts for in take's limit.
func (q *fairQueue[T]) weightOf(v T) int {
	if q.weight == nil {
		return 1
	}
	return max(q.weight(v), 1)
}

// drain removes and returns everything queued, in no particular order.
func (q *fairQueue[T]) drain() []T {
	var out []T
	for _, items := range q.queues {
		out = append(out, items...)
	}
	*q = fairQueue[T]{queues: map[string][]T{}, size: q.size, weight: q.weight}
	return out
}

// fairInbox is a fairQueue of messages between a JetStream consumer's
// callback (push) and the loop that handles batches (take). push blocks
// while the inbox is full (window messages or maxBytes), which holds the
// consumer's pulls back; so a burst is read ahead while batches are being
// stored, and memory stays bounded whatever the backlog.
type fairInbox struct {
	mu       sync.Mutex
	q        *fairQueue[jetstream.Msg]
	window   int
	maxBytes int
	nonEmpty chan struct{} // capacity 1: something was pushed
	space    chan struct{} // capacity 1: something was taken
	done     <-chan struct{}
}

// newFairInbox makes an inbox of window messages and maxBytes; take's max
// counts weight(msg) for each message (nil: one each).
func newFairInbox(window, maxBytes int, weight func(jetstream.Msg) int, done <-chan struct{}) *fairInbox {
	q := newFairQueue(func(m jetstream.Msg) int { return len(m.Data()) })
	q.weight = weight
	return &fairInbox{
		q:      q,
		window: window, maxBytes: maxBytes,
		nonEmpty: make(chan struct{}, 1), space: make(chan struct{}, 1), done: done,
	}
}

// push queues msg under key, waiting for room; once done is closed it
// drops msg unacknowledged (JetStream hands it out again after AckWait).
func (in *fairInbox) push(key string, msg jetstream.Msg) {
	in.mu.Lock()
	for in.q.len >= in.window || in.q.bytes >= in.maxBytes {
		in.mu.Unlock()
		select {
		case <-in.space:
		case <-in.done:
			return
		}
		in.mu.Lock()
	}
	in.q.push(key, msg)
	in.mu.Unlock()
	signal(in.nonEmpty)
}

// take waits for messages and returns messages weighing up to max (at
// least one), round-robin across keys; false once ctx is done.
func (in *fairInbox) take(ctx context.Context, max int) ([]jetstream.Msg, bool) {
	in.mu.Lock()
	for in.q.len == 0 {
		in.mu.Unlock()
		select {
		case <-in.nonEmpty:
		case <-ctx.Done():
			return nil, false
		}
		in.mu.Lock()
	}
	batch := in.q.take(max)
	in.mu.Unlock()
	signal(in.space)
	return batch, true
}

// nakAll hands every queued message back to JetStream at once, for
// another coordinator.
func (in *fairInbox) nakAll() {
	in.mu.Lock()
	msgs := in.q.drain()
	in.mu.Unlock()
	for _, msg := range msgs {
		_ = msg.Nak()
	}
}

// signal wakes the waiter of a capacity-1 channel, if none is pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
