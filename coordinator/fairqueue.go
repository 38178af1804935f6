package coordinator

import (
	"context"
	"slices"
	"sync"
	"time"

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
	// keyWeights and keyBytes are, per key, its items' weights and bytes.
	keyWeights map[string]int
	keyBytes   map[string]int
	// endedEarly says that the last take ended early (see take).
	endedEarly bool
	size       func(T) int
	// weight, when set, is what an item counts for in take's max (the
	// submissions a message carries); else each counts for one.
	weight func(T) int
	// quantum is the weight a key may give a take in one turn (one item
	// at least); 0 is one item a turn.
	quantum int
}

func newFairQueue[T any](size func(T) int) *fairQueue[T] {
	return &fairQueue[T]{queues: map[string][]T{}, keyWeights: map[string]int{}, keyBytes: map[string]int{}, size: size}
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
	w, b := q.weightOf(v), q.size(v)
	q.weights += w
	q.bytes += b
	q.keyWeights[key] += w
	q.keyBytes[key] += b
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
	out, _ := q.takeAllowed(limit, nil)
	return out
}

// takeAllowed is take, with the keys that allow says may not be taken now
// (a group over its submission rate) passed over, their items left queued
// in their order: allow is asked for each item before it is taken, with
// its weight and bytes, and takes what it allows (a token bucket's
// tokens). When it
// passes every key over, takeAllowed returns what it took and the
// shortest wait allow named.
func (q *fairQueue[T]) takeAllowed(limit int, allow func(key string, weight, bytes int) (bool, time.Duration)) ([]T, time.Duration) {
	out := make([]T, 0, min(limit, q.len))
	rotation, ranOut := len(q.ring), false // visits left in this rotation
	passed, retry := 0, time.Duration(0)   // keys passed over in a row; the shortest wait
	quantum := max(q.quantum, 1)
	for taken := 0; taken < limit && q.len > 0; {
		if q.next >= len(q.ring) {
			q.next = 0
		}
		key := q.ring[q.next]
		// One visit: the key's items up to quantum of weight (one at
		// least), so that a key of light items (single submissions) gets
		// as many submissions a turn as a key of heavy ones (messages of
		// a hundred).
		visited, removed, deferred := 0, false, false
		for visited < quantum && taken < limit {
			items := q.queues[key]
			v := items[0]
			w := q.weightOf(v)
			if allow != nil {
				if ok, wait := allow(key, w, q.size(v)); !ok {
					if visited == 0 {
						deferred = true
						if passed == 0 || wait < retry {
							retry = wait
						}
					}
					break
				}
			}
			var zero T
			items[0] = zero
			items = items[1:]
			out = append(out, v)
			taken += w
			visited += w
			b := q.size(v)
			q.len--
			q.weights -= w
			q.bytes -= b
			if len(items) == 0 {
				delete(q.queues, key)
				delete(q.keyWeights, key)
				delete(q.keyBytes, key)
				q.ring = append(q.ring[:q.next], q.ring[q.next+1:]...)
				removed, ranOut = true, true
				break
			}
			q.queues[key] = items
			q.keyWeights[key] -= w
			q.keyBytes[key] -= b
		}
		if deferred {
			if passed++; passed >= len(q.ring) {
				break
			}
		} else {
			passed = 0
		}
		if !removed {
			q.next++
		}
		if rotation--; rotation == 0 {
			if ranOut && !q.endedEarly && 2*taken <= limit && q.weights >= limit-taken {
				q.endedEarly = true
				return out, 0
			}
			rotation, ranOut = len(q.ring), false
		}
	}
	q.endedEarly = false
	if len(out) > 0 {
		retry = 0
	}
	return out, retry
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
	*q = fairQueue[T]{queues: map[string][]T{}, keyWeights: map[string]int{}, keyBytes: map[string]int{}, size: q.size, weight: q.weight, quantum: q.quantum}
	return out
}

// fairInbox is a fairQueue of submission messages between the fetches
// of streamSources (add) and the loop that stores batches (take). Each
// group has room for groupWeight submissions and groupBytes (a fetch asks
// for what is left, and may go over by one message); all groups together
// for maxBytes. A group with no room is not fetched from: its submissions
// wait in NATS, not in memory.
type fairInbox struct {
	mu          sync.Mutex
	q           *fairQueue[inboxItem]
	groupWeight int
	groupBytes  int
	maxBytes    int
	nonEmpty    chan struct{} // capacity 1: something was added
	// allow, when set, defers a group over its submission rate (see
	// fairQueue.takeAllowed).
	allow func(group string, weight, bytes int) (bool, time.Duration)
	// room, when set, is called with each group that take made room for
	// (streamSources.roomFor), outside the inbox's lock.
	room func(group string)
	// weight is the submissions (or reports) a message carries, read once
	// when it is added: it scans the message's body.
	weight func(jetstream.Msg) int
	// full is set while the inbox holds maxBytes: every group waits.
	full bool
}

// newFairInbox makes an inbox with room for groupWeight submissions and
// groupBytes per group and maxBytes in all; weight(msg) is the submissions
// msg carries.
func newFairInbox(groupWeight, groupBytes, maxBytes int, weight func(jetstream.Msg) int) *fairInbox {
	q := newFairQueue(func(it inboxItem) int { return len(it.msg.Data()) })
	q.weight = func(it inboxItem) int { return it.weight }
	q.quantum = ingestQuantum
	return &fairInbox{
		q: q, weight: weight,
		groupWeight: max(groupWeight, 1), groupBytes: max(groupBytes, 1), maxBytes: max(maxBytes, 1),
		nonEmpty: make(chan struct{}, 1),
	}
}

// roomFor says how many submissions group has room for (at least one),
// or false if it has none, or the inbox is full.
func (in *fairInbox) roomFor(group string) (int, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	w := in.q.keyWeights[group]
	if in.q.bytes >= in.maxBytes {
		in.full = true
		return 0, false
	}
	if w >= in.groupWeight || in.q.keyBytes[group] >= in.groupBytes {
		return 0, false
	}
	return in.groupWeight - w, true
}

// queued is the weight of group's messages in the inbox.
func (in *fairInbox) queued(group string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.q.keyWeights[group]
}

// add queues msg under group, behind the group's earlier messages, and
// returns its weight. It never waits: roomFor says whether to fetch.
func (in *fairInbox) add(group string, msg jetstream.Msg) int {
	it := inboxItem{group: group, msg: msg, weight: max(in.weight(msg), 1), added: time.Now()}
	in.mu.Lock()
	in.q.push(group, it)
	in.mu.Unlock()
	signal(in.nonEmpty)
	return it.weight
}

// take waits for messages and returns messages weighing up to limit (at
// least one), round-robin across groups, passing over the groups that
// allow defers (waiting until one may go on); false once ctx is done.
func (in *fairInbox) take(ctx context.Context, limit int) ([]jetstream.Msg, bool) {
	for {
		in.mu.Lock()
		var items []inboxItem
		var retry time.Duration
		if in.q.len > 0 {
			items, retry = in.q.takeAllowed(limit, in.allow)
		}
		var roomed []string
		if len(items) > 0 {
			roomed = in.roomedLocked(items)
		}
		waiting := in.q.len > 0 // read under the lock: add pushes from the fetcher's goroutine
		in.mu.Unlock()
		if in.room != nil {
			for _, g := range roomed {
				in.room(g)
			}
		}
		if len(items) > 0 {
			batch := make([]jetstream.Msg, len(items))
			for i, it := range items {
				batch[i] = it.msg
			}
			return batch, true
		}
		var wait <-chan time.Time
		if waiting {
			// Every group waits for its rate: take again once the first
			// may go on (at least a millisecond on: a bucket a hair short
			// of a token says "now", and nothing else would wake this).
			t := time.NewTimer(max(retry, time.Millisecond))
			wait = t.C
			defer t.Stop()
		}
		select {
		case <-in.nonEmpty:
		case <-wait:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// roomedLocked returns the groups of batch that now have room, or every
// group if the inbox was full and is not now.
func (in *fairInbox) roomedLocked(batch []inboxItem) []string {
	if in.full && in.q.bytes < in.maxBytes {
		in.full = false
		groups := make([]string, 0, len(in.q.queues))
		for g := range in.q.queues {
			groups = append(groups, g)
		}
		// And the groups that ran out: any group may be waiting.
		return append(groups, in.batchGroups(batch)...)
	}
	return in.batchGroups(batch)
}

// batchGroups returns the distinct groups of batch's messages with room
// now.
func (in *fairInbox) batchGroups(batch []inboxItem) []string {
	var groups []string
	for _, it := range batch {
		g := it.group
		if slices.Contains(groups, g) {
			continue
		}
		if in.q.keyWeights[g] < in.groupWeight && in.q.keyBytes[g] < in.groupBytes {
			groups = append(groups, g)
		}
	}
	return groups
}

// older returns the queued messages that came before t, and not before
// since.
func (in *fairInbox) older(t, since time.Time) []jetstream.Msg {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []jetstream.Msg
	for _, items := range in.q.queues {
		for _, it := range items {
			if it.added.Before(t) && !it.added.Before(since) {
				out = append(out, it.msg)
			}
		}
	}
	return out
}

// nakAll hands every queued message back to JetStream at once, for
// another coordinator.
func (in *fairInbox) nakAll() {
	in.mu.Lock()
	msgs := in.q.drain()
	in.mu.Unlock()
	for _, it := range msgs {
		_ = it.msg.Nak()
	}
}

// ingestQuantum is the submissions a group gives a batch in one turn: a
// message of SubmitMany's (a hundred), or a hundred single submissions.
const ingestQuantum = 100

// inboxItem is a message of the inbox, with its group.
type inboxItem struct {
	group  string
	msg    jetstream.Msg
	weight int       // in.weight(msg), read once
	added  time.Time // when it came (fairInbox.older)
}

// signal wakes the waiter of a capacity-1 channel, if none is pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
