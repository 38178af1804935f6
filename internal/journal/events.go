package journal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unique"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

// The journal is the events' outbox: the events of a row are what its
// fold changed, the same for every reader (the fold is a pure function of
// the rows), so any coordinator that folded a row can publish them, under
// the same ids. The leader publishes them as it folds (LeaderConfig.
// Publish), then records the tail position they reach in the lease's row
// (published); the others keep the events of the rows that position does
// not cover yet, and a successor publishes those: each event at least
// once, none lost with a leader, and a duplicate has the id of the first.

// EventsOf are the lifecycle events of the changes of a row of partition:
// one per change of state (a change of priority is none), with the id
// "j<partition>.<row id>.<index of the change>", the row's time, and the
// job's task, attempt and executor.
func EventsOf(partition int16, row Row, changes []Change) []fairway.Event {
	pending := pendingEventsOf(nil, row, changes)
	out := make([]fairway.Event, len(pending))
	for i, p := range pending {
		out[i] = p.event(partition)
	}
	return out
}

// pendingEvent is an event not yet known to be published, and the
// transaction of its row, held as the little that makes it (event): a
// leader that folds a million submissions faster than they are published
// holds a million of them (80 bytes each: the row's transaction, id and
// time shared by its events, the names as handles to the one copy of each,
// where a fairway.Event and its id were 272).
type pendingEvent struct {
	row      *pendingRow
	ref      fairway.JobRef
	task     unique.Handle[string]
	executor unique.Handle[string] // the zero handle: none
	// detail: for a failure or a refusal, the rest (nil for most).
	detail  *eventDetail
	change  int32
	attempt int32
	// run, when not 0, makes this one entry the events of the first run
	// changes of its row, a submitted row each of whose items made a job
	// in state to: change k is item k's, from "", with no error, attempt
	// or executor. Their jobs and tasks are the row's items, which publish
	// reads again (ref and task are unset): a million submissions cost
	// the leader a few entries, not a million, until they are published.
	run int32
	// from and to are the states, as their place in eventStates.
	from, to uint8
}

// minRun is the fewest changes a row's events are held as a run for.
const minRun = 16

// pendingOf appends to dst the pending events of a row's changes: as one
// run when they can be (a submitted row of at least minRun items in the
// binary form, each of which made a job in one state, with no error), as
// pendingEventsOf otherwise.
func pendingOf(dst []pendingEvent, row Row, changes []Change) []pendingEvent {
	if row.Kind != Submitted || len(changes) < minRun || len(changes) > math.MaxInt32 || batchCount(row.Body) != len(changes) {
		return pendingEventsOf(dst, row, changes)
	}
	to := stateCode(changes[0].To)
	for _, c := range changes {
		if c.From != "" || stateCode(c.To) != to || to == otherState || c.Error != "" || c.Refusal != nil || c.Attempt != 0 || c.Executor != "" {
			return pendingEventsOf(dst, row, changes)
		}
	}
	return append(dst, pendingEvent{row: &pendingRow{xid: row.XID, id: row.ID, at: row.At}, run: int32(len(changes)), to: to}) //nolint:gosec // G115: checked above
}

// runEvent is event k of run p, whose row's items are items.
func (p *pendingEvent) runEvent(partition int16, k int, items []Item) fairway.Event {
	it := &items[k]
	return fairway.Event{
		ID:    p.row.eventID(partition, k),
		JobID: it.ID, Group: it.Group, Task: it.Task, Time: p.row.at, State: eventStates[p.to],
	}
}

// pendingRow is what the pending events of a row share.
type pendingRow struct {
	xid uint64
	id  int64
	at  time.Time
}

// eventID is the id of the event of the k-th change of the row, in
// partition: "j<partition>.<row id>.<k>.<the row's time, µs, base 36>".
// The same for whichever leader publishes it (a successor publishes
// again what its predecessor may have, under the same ids, and
// JetStream's duplicate window and subscribers drop the repeats), and
// unique beyond one database: a row's id alone comes again in a database
// made anew, restored to an earlier point or promoted from a replica that
// missed the last commits, and its events would then be dropped as
// repeats of the old ones; its transaction's time does not come again.
func (r *pendingRow) eventID(partition int16, k int) string {
	b := make([]byte, 0, 32)
	b = append(b, 'j')
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, r.id, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, r.at.UnixMicro(), 36)
	return string(b)
}

// handleOf is s as a handle ("" as the zero handle), and nameOf the other
// way.
func handleOf(s string) unique.Handle[string] {
	if s == "" {
		return unique.Handle[string]{}
	}
	return unique.Make(s)
}

func nameOf(h unique.Handle[string]) string {
	if h == (unique.Handle[string]{}) {
		return ""
	}
	return h.Value()
}

// eventDetail is what few events carry: an error and a refusal's code
// and field, and a state that eventStates lacks (none the fold makes).
type eventDetail struct {
	err      string
	code     fairway.Code
	field    string
	from, to fairway.State
}

// eventStates are the states a pending event holds by their place ("" is
// a new job's previous state); otherState, one its detail holds.
var eventStates = [...]fairway.State{"", fairway.StatePending, fairway.StateWaiting, fairway.StateScheduled, fairway.StateRunning,
	fairway.StateStuck, fairway.StateSuccess, fairway.StateFailed, fairway.StateCancelled, fairway.StateRejected}

const otherState = uint8(len(eventStates))

func stateCode(s fairway.State) uint8 {
	for i, e := range eventStates {
		if e == s {
			return uint8(i) //nolint:gosec // G115: eventStates has 10
		}
	}
	return otherState
}

// pendingEventsOf appends to dst the events of the changes of a row (see
// EventsOf).
func pendingEventsOf(dst []pendingEvent, row Row, changes []Change) []pendingEvent {
	var shared *pendingRow
	for i, c := range changes {
		if c.From == c.To {
			continue
		}
		if shared == nil {
			shared = &pendingRow{xid: row.XID, id: row.ID, at: row.At}
		}
		p := pendingEvent{row: shared, ref: c.Job, task: handleOf(c.Task), from: stateCode(c.From), to: stateCode(c.To),
			change: int32(i), attempt: c.Attempt, executor: handleOf(c.Executor)} //nolint:gosec // G115: a row holds far fewer than 2^31 changes
		if c.Error != "" || c.Refusal != nil || p.from == otherState || p.to == otherState {
			p.detail = &eventDetail{err: c.Error, from: c.From, to: c.To}
			if r := c.Refusal; r != nil {
				p.detail.code, p.detail.field = r.Code, r.Field
			}
		}
		dst = append(dst, p)
	}
	return dst
}

// event is the pending event as it is published by the leader of
// partition.
func (p pendingEvent) event(partition int16) fairway.Event {
	ev := fairway.Event{
		ID:    p.row.eventID(partition, int(p.change)),
		JobID: p.ref.ID, Group: p.ref.Group, Task: nameOf(p.task), Attempt: int(p.attempt), Executor: nameOf(p.executor), Time: p.row.at,
	}
	if p.from < otherState {
		ev.PreviousState = eventStates[p.from]
	}
	if p.to < otherState {
		ev.State = eventStates[p.to]
	}
	if d := p.detail; d != nil {
		ev.Error, ev.Code, ev.Field = d.err, d.code, d.field
		if p.from == otherState {
			ev.PreviousState = d.from
		}
		if p.to == otherState {
			ev.State = d.to
		}
	}
	return ev
}

// snapshotView is a pg_snapshot read in Go ("xmin:xmax:xip,…"): which
// transactions had ended in it.
type snapshotView struct {
	xmin, xmax uint64
	xip        []uint64
}

func parseSnapshot(s string) (snapshotView, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return snapshotView{}, fmt.Errorf("not a pg_snapshot: %q", s)
	}
	var v snapshotView
	var err error
	if v.xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return snapshotView{}, fmt.Errorf("not a pg_snapshot: %q", s)
	}
	if v.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return snapshotView{}, fmt.Errorf("not a pg_snapshot: %q", s)
	}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			n, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return snapshotView{}, fmt.Errorf("not a pg_snapshot: %q", s)
			}
			v.xip = append(v.xip, n)
		}
	}
	return v, nil
}

// ended says whether transaction xid had ended in the snapshot, as
// pg_visible_in_snapshot does.
func (v snapshotView) ended(xid uint64) bool {
	return xid < v.xmin || (xid < v.xmax && !slices.Contains(v.xip, xid))
}

// readPublished reads the position the partition's published events
// reach (nil: none recorded).
func readPublished(ctx context.Context, q Querier, partition int16) (*snapshotView, error) {
	var pos *string
	err := q.QueryRow(ctx, `SELECT published::text FROM fairway_journal_lease WHERE partition = $1`, partition).Scan(&pos)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && pos == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading where journal partition %d's events were published: %w", partition, err)
	}
	v, err := parseSnapshot(*pos)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// notePublished records, under the leader's epoch, that the events of
// every row read up to position are published.
func notePublished(ctx context.Context, q Querier, partition int16, epoch int64, position string) error {
	_, err := q.Exec(ctx, `UPDATE fairway_journal_lease SET published = $1::pg_snapshot WHERE partition = $2 AND epoch = $3`,
		position, partition, epoch)
	if err != nil {
		return fmt.Errorf("recording where journal partition %d's events were published: %w", partition, err)
	}
	return nil
}

// quietNote is how often at most the leader records a position reached by
// rows that make no event (progress, weights, pauses) while none waits
// (LeaderConfig.PublishedNote when longer).
const quietNote = time.Second

// noteQuiet records, with no event pending, the position the tail has
// reached, if rows that make no event (progress, a weight, a pause) moved
// it since the last record, at most every quietNote: else the published
// position would stay behind them, and the partition's event lag
// (Leader.Status) would grow on a quiet cluster. Every folded row's events
// are published when none is pending. Called with l.mu held; it unlocks.
func (l *Leader) noteQuiet(ctx context.Context) error {
	// No row folded since the last record (or look): nothing to record
	// (the tail's position moves with every transaction that ends in the
	// cluster, rows of the journal or not).
	if l.tail == nil || l.sending != nil || l.rowsFolded == l.quietRows || time.Since(l.notedAt) < max(quietNote, l.cfg.PublishedNote) {
		l.mu.Unlock()
		return nil
	}
	position, epoch, rows := l.tail.Position(), l.lease.Epoch, l.rowsFolded
	l.mu.Unlock()
	if position == "" {
		return nil
	}
	if position != l.noted {
		if err := notePublished(ctx, l.db, l.cfg.Partition, epoch, position); err != nil {
			return err
		}
		l.notedAt, l.noted = time.Now(), position
	}
	l.quietRows = rows
	return nil
}

// trimPublished drops the pending events of the rows that the position
// v covers. Called with l.mu held.
func (l *Leader) trimPublished(v *snapshotView) {
	if v == nil {
		return
	}
	l.published, l.sending = v, nil
	l.pending = slices.DeleteFunc(l.pending, func(p pendingEvent) bool { return v.ended(p.row.xid) })
}

// publishChunk bounds the events publish makes and hands on at a time,
// and publishRound the chunks of one call: a backlog of a million costs
// their pending form, not also a million fairway.Events, and Run's loop
// comes round between rounds (to renew the lease, fold and settle) while a
// backlog is published.
const (
	publishChunk = 4096
	publishRound = 8
)

// sending is the batch of pending events publish hands on over one or
// more calls: the first n, which the tail's position covers, of which the
// first sent are handed on. Only publish (Run's goroutine) reads and
// changes it; the others may only drop it (Leader.sending = nil), under
// the lock.
type sending struct {
	n, sent  int
	position string
	epoch    int64
	// rows is Leader.rowsFolded when position was taken: the rows it
	// covers.
	rows uint64
	// inRun are the events of the entry at sent, a run, handed on; items
	// are its row's items, read once for the run's chunks.
	inRun int
	items []Item
}

// publish hands the pending events to LeaderConfig.Publish, a round of
// chunks at a time, and once a batch is handed on records the position it
// reaches, without the lock: folds, claims and reports go on meanwhile
// (only Run's loop publishes, and only it drops pending events while
// leading). The events of every row folded up to the tail's position are
// the first pending ones when it is read, so once they are published that
// position is where the published events reach. Called while leading;
// events published whose position could not be recorded stay pending, and
// go again (under their ids): at least once.
//
// The position is recorded (notePublished, a commit) once per
// LeaderConfig.PublishedNote at most, not after every round: with short
// jobs a round is a claim's or a report's few events, and the records of
// the position were a third of the commits (1,000 jobs of 5 ms: 201 of
// 560). Recorded later, it only makes a successor, or a leader that
// restores, publish again up to that much more (at least once, as after
// any failure), and a prune waits as long; a snapshot, which covers no row
// whose events are not recorded as published, has it recorded as soon as
// it is due. Run's poll brings publish round to record it.
func (l *Leader) publish(ctx context.Context) error {
	l.mu.Lock()
	if l.cfg.Publish == nil || !l.leading {
		l.mu.Unlock()
		return nil
	}
	if len(l.pending) == 0 {
		return l.noteQuiet(ctx) // unlocks
	}
	if b := l.sending; b == nil || b.epoch != l.lease.Epoch || len(l.pending) < b.n || (b.sent == b.n && len(l.pending) > b.n) {
		position := l.tail.Position()
		if position == "" {
			l.mu.Unlock()
			return nil // a read cut by its limit: after the next fold
		}
		next := &sending{n: len(l.pending), position: position, epoch: l.lease.Epoch, rows: l.rowsFolded}
		if b != nil && b.epoch == next.epoch && b.sent == b.n && len(l.pending) > b.n {
			// Handed on, its position not yet recorded (PublishedNote):
			// the new batch goes on from it, and its position covers
			// both.
			next.sent = b.n
		}
		l.sending = next
	}
	b := l.sending
	noteNow := time.Since(l.notedAt) >= l.cfg.PublishedNote || l.state == nil || l.snapshotWanted()
	l.mu.Unlock()
	v, err := parseSnapshot(b.position)
	if err != nil {
		return err
	}
	evs := make([]fairway.Event, 0, min(b.n-b.sent, publishChunk)) // a run's events grow it; at low load a chunk is an event or two
	for range publishRound {
		if b.sent == b.n {
			break
		}
		// A chunk: the single events up to a run, or the next events of
		// a run.
		evs = evs[:0]
		next, inRun := b.sent, b.inRun
		var run pendingEvent
		var kept []byte
		l.mu.Lock()
		if l.sending != b || !l.leading || l.lease.Epoch != b.epoch {
			l.mu.Unlock()
			return nil // no longer leading: the pending events are the next leader's
		}
		for next < b.n && len(evs) < publishChunk {
			p := &l.pending[next]
			if p.run > 0 {
				if len(evs) == 0 {
					run = *p
					if r, ok := l.recent.get(p.row.id); ok && b.items == nil {
						kept = r.body
					}
				}
				break
			}
			evs = append(evs, p.event(l.cfg.Partition))
			next++
		}
		l.mu.Unlock()
		if run.run > 0 {
			if b.items == nil {
				items, err := l.runItems(ctx, run, kept)
				if err != nil {
					return err
				}
				b.items = items
			}
			end := min(int(run.run), inRun+publishChunk)
			for k := inRun; k < end; k++ {
				evs = append(evs, run.runEvent(l.cfg.Partition, k, b.items))
			}
			if inRun = end; inRun == int(run.run) {
				next, inRun = next+1, 0
			}
		}
		if err := l.cfg.Publish(ctx, evs); err != nil {
			return fmt.Errorf("publishing the events of journal partition %d: %w", l.cfg.Partition, err)
		}
		b.sent, b.inRun = next, inRun
		if inRun == 0 {
			b.items = nil
		}
	}
	if b.sent < b.n {
		l.Wake() // the next round at once, after the loop's other work (a fold of what came meanwhile among it)
		return nil
	}
	if !noteNow {
		return nil // at a later call (Run polls), within PublishedNote
	}
	if err := notePublished(ctx, l.db, l.cfg.Partition, b.epoch, b.position); err != nil {
		return err
	}
	l.notedAt, l.noted, l.quietRows = time.Now(), b.position, b.rows
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sending != b {
		// Led no more meanwhile, and the pending events were trimmed
		// by the published position or dropped by a restore.
		return nil
	}
	l.sending = nil
	if rest := len(l.pending) - b.n; cap(l.pending) > 4*publishChunk && rest < cap(l.pending)/4 {
		// A backlog's array is not kept for good once published.
		l.pending = slices.Clone(l.pending[b.n:])
	} else {
		l.pending = slices.Delete(l.pending, 0, b.n)
	}
	l.published = &v
	return nil
}

// runItems are the items of run's row: from body when the leader kept it
// (recentRows), else read again from PostgreSQL (a row whose events are
// not published is never pruned: prune.go).
func (l *Leader) runItems(ctx context.Context, run pendingEvent, body []byte) ([]Item, error) {
	if body == nil {
		err := l.db.QueryRow(ctx, `SELECT body FROM fairway_journal WHERE id = $1`, run.row.id).Scan(&body)
		if err != nil {
			return nil, fmt.Errorf("reading journal row %d again to publish its events: %w", run.row.id, err)
		}
	}
	items, err := Decode(body)
	if err != nil {
		return nil, fmt.Errorf("journal row %d: %w", run.row.id, err)
	}
	if len(items) < int(run.run) {
		return nil, fmt.Errorf("journal row %d holds %d items, where its fold made %d jobs", run.row.id, len(items), run.run)
	}
	return items, nil
}
