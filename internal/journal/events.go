package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
	var out []fairway.Event
	prefix := "j" + strconv.Itoa(int(partition)) + "." + strconv.FormatInt(row.ID, 10) + "."
	for i, c := range changes {
		if c.From == c.To {
			continue
		}
		ev := fairway.Event{
			ID: prefix + strconv.Itoa(i), JobID: c.Job.ID, Group: c.Job.Group, Task: c.Task,
			State: c.To, PreviousState: c.From, Attempt: int(c.Attempt), Error: c.Error, Executor: c.Executor,
			Time: row.At,
		}
		if r := c.Refusal; r != nil {
			ev.Code, ev.Field = r.Code, r.Field
		}
		out = append(out, ev)
	}
	return out
}

// pendingEvent is an event not yet known to be published, and the
// transaction of its row.
type pendingEvent struct {
	xid uint64
	ev  fairway.Event
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

// trimPublished drops the pending events of the rows that the position
// v covers. Called with l.mu held.
func (l *Leader) trimPublished(v *snapshotView) {
	if v == nil {
		return
	}
	l.published = v
	l.pending = slices.DeleteFunc(l.pending, func(p pendingEvent) bool { return v.ended(p.xid) })
}

// publish hands the pending events to LeaderConfig.Publish and records
// the position they reach, without the lock: folds, claims and reports go
// on meanwhile (only Run's loop publishes, and only it drops pending
// events). The events of every row folded up to the tail's position are
// the first pending ones when it is read, so once they are published
// that position is where the published events reach. Called while
// leading; events published whose position could not be recorded stay
// pending, and go again: at least once.
func (l *Leader) publish(ctx context.Context) error {
	l.mu.Lock()
	if l.cfg.Publish == nil || !l.leading || len(l.pending) == 0 {
		l.mu.Unlock()
		return nil
	}
	n, position, epoch := len(l.pending), l.tail.Position(), l.lease.Epoch
	if position == "" {
		l.mu.Unlock()
		return nil // a read cut by its limit: after the next fold
	}
	evs := make([]fairway.Event, n)
	for i, p := range l.pending {
		evs[i] = p.ev
	}
	l.mu.Unlock()
	v, err := parseSnapshot(position)
	if err != nil {
		return err
	}
	if err := l.cfg.Publish(ctx, evs); err != nil {
		return fmt.Errorf("publishing the events of journal partition %d: %w", l.cfg.Partition, err)
	}
	if err := notePublished(ctx, l.db, l.cfg.Partition, epoch, position); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = slices.Delete(l.pending, 0, n)
	l.published = &v
	return nil
}
