package journal

import (
	"context"
	"slices"
	"time"
	"unsafe"
)

// WriteLive writes fairway_live_job now, as the leader does every
// LeaderConfig.LiveEvery (live.go).
func (l *Leader) WriteLive(ctx context.Context) error { return l.writeLive(ctx) }

// WakeUnread is a Wake whose read of the tail has not come yet.
func (l *Leader) WakeUnread() { l.wakes.Add(1) }

// ForgetLive drops the list of jobs changed since the last write of
// fairway_live_job: the next write rewrites it.
func (l *Leader) ForgetLive() {
	l.mu.Lock()
	l.live.dirty = nil
	l.mu.Unlock()
}

// PublishChunk and PublishRound are publishChunk and publishRound, and
// PendingEventSize a pending event's size (events.go).
const (
	PublishChunk     = publishChunk
	PublishRound     = publishRound
	PendingEventSize = unsafe.Sizeof(pendingEvent{})
)

// SnapshotDue is snapshotDue with the default LeaderConfig.
func SnapshotDue(rows, changes, jobs int, elapsed time.Duration) bool {
	return snapshotDue(LeaderConfig{}.withDefaults(), rows, changes, jobs, elapsed)
}

// DecodeSome is decodeSome.
func DecodeSome(body []byte, want []int32) (map[int32]Item, error) { return decodeSome(body, want) }

// SetSnapshotPartBytes sets the size of a snapshot's parts until the
// test ends.
func SetSnapshotPartBytes(t interface{ Cleanup(func()) }, n int) {
	was := snapshotPartBytes
	snapshotPartBytes = n
	t.Cleanup(func() { snapshotPartBytes = was })
}

// PendingEntries is how many entries hold the leader's pending events (a
// run of a submitted row's is one).
func (l *Leader) PendingEntries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// SetReadBytes sets readBytes until the test ends.
func SetReadBytes(t interface{ Cleanup(func()) }, n int) {
	was := readBytes
	readBytes = n
	t.Cleanup(func() { readBytes = was })
}

// RecentRows are the ids of the rows whose bodies the leader keeps, oldest
// first.
func (l *Leader) RecentRows() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recent.order)
}

// SetMaxRowItems sets maxRowItems until the test ends.
func SetMaxRowItems(t interface{ Cleanup(func()) }, n int) {
	was := maxRowItems
	maxRowItems = n
	t.Cleanup(func() { maxRowItems = was })
}

// KeptDecodeSome keeps body as a submitted row (recentRows, bounded to
// max bytes) and reads the items want of it twice, as two claims do (the
// second through the offsets the first found), returning what the second
// read and the bytes the rows count then.
func KeptDecodeSome(body []byte, want []int32, max int) (map[int32]Item, int, error) {
	r := newRecentRows(max)
	r.keep(1, time.Time{}, body)
	if _, _, err := r.decodeSome(1, want); err != nil {
		return nil, r.bytes, err
	}
	sub, _, err := r.decodeSome(1, want)
	return sub.items, r.bytes, err
}

// KeptRowsBytes keeps bodies in turn as rows 1, 2, … of a recentRows
// bounded to max bytes, reading item 0 of each once kept, and returns the
// bytes it counts and the rows it keeps at the end.
func KeptRowsBytes(bodies [][]byte, max int) (int, []int64) {
	r := newRecentRows(max)
	for i, b := range bodies {
		r.keep(int64(i+1), time.Time{}, b)
		_, _, _ = r.decodeSome(int64(i+1), []int32{0})
	}
	return r.bytes, r.order
}

// RecordsPerBatch is recordsPerBatch, for the tests.
const RecordsPerBatch = recordsPerBatch
