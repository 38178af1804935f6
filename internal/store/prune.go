package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5"
)

//go:embed sql/prune.sql
var pruneSQL string

//go:embed sql/prune_ids.sql
var pruneIDsSQL string

// PruneBatchDefault is how many jobs one Prune call removes at most.
const PruneBatchDefault = 1000

// Prune removes one batch of at most limit finished jobs in state (success,
// failed or cancelled) that ended more than olderThan ago, with their
// logs; group "" means every group. It returns how many it removed: fewer
// than limit means none are left. Each batch is its own short transaction.
// A pruned job's id may be used again by a new submission.
func (s *Store) Prune(ctx context.Context, state fairway.State, olderThan time.Duration, group string, limit int) (int, error) {
	if !state.Final() {
		return 0, fairway.Invalid("state", "%q is not a final state: prune success, failed or cancelled jobs", state)
	}
	if olderThan < 0 {
		return 0, fairway.Invalid("older_than", "must not be negative, got %s", olderThan)
	}
	if limit <= 0 {
		limit = PruneBatchDefault
	}
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) (err error) {
		n, err = prune(ctx, tx, state, olderThan, group, limit)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pruning %s jobs: %w", state, interpretError(err))
	}
	return n, nil
}

// prune is Prune's work in tx.
func prune(ctx context.Context, tx pgx.Tx, state fairway.State, olderThan time.Duration, group string, limit int) (int, error) {
	if _, err := tx.Exec(ctx, journal.RecordsLockSQL); err != nil {
		return 0, err
	}
	// A statement of its own, after the lock: it sees what the writer
	// before it wrote (another prune, a retry by hand).
	rows, err := tx.Query(ctx, pruneSQL, string(state), interval(olderThan), group, limit)
	if err != nil {
		return 0, err
	}
	var groups, ids []string
	var g, id string
	if _, err := pgx.ForEachRow(rows, []any{&g, &id}, func() error {
		groups, ids = append(groups, g), append(ids, id)
		return nil
	}); err != nil {
		return 0, err
	}
	if len(ids) > 0 {
		if _, err := tx.Exec(ctx, pruneIDsSQL, groups, ids); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}
