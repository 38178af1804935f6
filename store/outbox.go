package store

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

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
func (s *Store) PublishEvents(ctx context.Context, limit int, publish func([]Event) error) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, outboxLockSQL, int64(outboxLock)).Scan(&locked); err != nil || !locked {
			return err
		}
		rows, err := tx.Query(ctx, outboxReadSQL, limit)
		if err != nil {
			return err
		}
		var ids []int64
		events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
			var e Event
			var id int64
			err := row.Scan(&id, &e.JobID, &e.Task, &e.Group, &e.State, &e.PreviousState, &e.Attempt, &e.Error, &e.Code, &e.Field, &e.Executor, &e.Periodic, &e.Time)
			e.ID = strconv.FormatInt(id, 10)
			ids = append(ids, id)
			return e, err
		})
		if err != nil || len(events) == 0 {
			return err
		}
		if err := publish(events); err != nil {
			return err
		}
		n = len(events)
		_, err = tx.Exec(ctx, outboxDeleteSQL, ids)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("publishing outbox events: %w", err)
	}
	return n, nil
}
