package store

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/outbox_delete.sql
	outboxDeleteSQL string
	//go:embed sql/outbox_lock.sql
	outboxLockSQL string
	//go:embed sql/outbox_read.sql
	outboxReadSQL string
)

// Event is an outbox event (fairway.Event: the store fills the same type
// the wire carries).
type Event = fairway.Event

// outboxLock is the advisory lock key of the outbox publisher: one
// publisher at a time keeps events in commit order.
const outboxLock = 0x6661697277617902

// PublishEvents hands up to limit outbox events, oldest first, to publish,
// and deletes them once publish returns nil. Only one caller at a time
// across all coordinators gets events (an advisory lock); the others get
// (0, nil). Events of one job are always in the order of their changes.
//
// Two round trips, the statements pipelined: begin, take the lock and
// read; then delete and commit. (One statement a round trip, as
// pgx.BeginFunc sends them, made five, on a path taken for every few jobs
// when jobs are short.) The lock is taken by a statement of its own, before
// the read: a statement's snapshot is taken before it runs, so a read that
// took the lock itself could see, with a snapshot from before the previous
// publisher's commit, the events that publisher had just published and
// deleted. The read also reads nothing without the lock (a coordinator
// that does not publish reads no row); its rows count only when the lock
// statement got the lock.
func (s *Store) PublishEvents(ctx context.Context, limit int, publish func([]Event) error) (int, error) {
	n, err := s.publishEvents(ctx, limit, publish)
	if err != nil {
		return 0, fmt.Errorf("publishing outbox events: %w", interpretError(err))
	}
	return n, nil
}

func (s *Store) publishEvents(ctx context.Context, limit int, publish func([]Event) error) (n int, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	defer func() {
		if err != nil {
			abandonTx(ctx, conn)
		}
	}()
	var locked bool
	var ids []int64
	var events []Event
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(outboxLockSQL, int64(outboxLock)).QueryRow(func(row pgx.Row) error { return row.Scan(&locked) })
	b.Queue(outboxReadSQL, limit, int64(outboxLock)).Query(func(rows pgx.Rows) error {
		var r outboxRow
		_, err := pgx.ForEachRow(rows, []any{&r.id, &r.ev.JobID, &r.ev.Task, &r.ev.Group, &r.ev.State, &r.ev.PreviousState, &r.ev.Attempt,
			&r.ev.Error, &r.ev.Code, &r.ev.Field, &r.ev.Executor, &r.ev.Periodic, &r.ev.Time,
			&r.jobIDs, &r.tasks, &r.groups, &r.states, &r.prevStates, &r.attempts, &r.errors, &r.executors, &r.times}, func() error {
			ids = append(ids, r.id)
			events = r.expand(events)
			return nil
		})
		return err
	})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	if !locked || len(events) == 0 { // another coordinator publishes, or none
		_, err := conn.Exec(ctx, "COMMIT")
		return 0, err
	}
	if err := publish(events); err != nil {
		return 0, err
	}
	b = &pgx.Batch{}
	// The delete of events JetStream has is committed without waiting for
	// its flush: lost in a crash of PostgreSQL, it leaves them to be
	// published again, which delivery at least once allows (subscribers
	// drop an event they had by its id). The next commit that waits flushes
	// it anyway. The relay's commit then no longer holds up the commits
	// that must wait (a submission's, a claim's) at the disk.
	b.Queue("SET LOCAL synchronous_commit = off")
	b.Queue(outboxDeleteSQL, ids)
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	return len(events), nil
}

// outboxRow is a row of the outbox: one event, or a pack of events whose
// fields are in the arrays where they differ (see 011_event_packs.sql).
type outboxRow struct {
	id         int64
	ev         Event
	jobIDs     []string
	tasks      []string
	groups     []string
	states     []fairway.State
	prevStates []fairway.State
	attempts   []int
	errors     []string
	executors  []string
	times      []time.Time
}

// expand appends the row's events to evs. An event's id is
// "<row id>.<the row's time, µs, base 36>", a pack's events'
// "<row id>.<index>.<time>": stable, and unique beyond one database (a
// row's id alone comes again in a database made anew or restored to an
// earlier point, and its events would be dropped as repeats of the old
// ones; see journal's pendingRow.eventID).
func (r *outboxRow) expand(evs []Event) []Event {
	id := strconv.FormatInt(r.id, 10)
	at := "." + strconv.FormatInt(r.ev.Time.UnixMicro(), 36)
	if r.jobIDs == nil {
		e := r.ev
		e.ID = id + at
		return append(evs, e)
	}
	for i := range r.jobIDs {
		e := r.ev
		e.ID = id + "." + strconv.Itoa(i) + at
		e.JobID = r.jobIDs[i]
		packed(&e.Task, r.tasks, i)
		packed(&e.Group, r.groups, i)
		packed(&e.State, r.states, i)
		packed(&e.PreviousState, r.prevStates, i)
		packed(&e.Attempt, r.attempts, i)
		packed(&e.Error, r.errors, i)
		packed(&e.Executor, r.executors, i)
		packed(&e.Time, r.times, i)
		evs = append(evs, e)
	}
	return evs
}

// packed sets *field to a pack's i-th value of it, when the pack holds the
// field in an array (else the row's scalar column stays).
func packed[T any](field *T, values []T, i int) {
	if i < len(values) {
		*field = values[i]
	}
}
