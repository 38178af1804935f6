package store

// Test hooks: the internals the tests read.

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// CheckMigrationNames exposes checkMigrationNames.
var CheckMigrationNames = checkMigrationNames

// PruneReads prunes as Prune does, in a transaction rolled back, and
// returns the rows its statements read of fairway_record, fairway_job_id
// and fairway_job_log, each [sequentially, through indexes].
func (s *Store) PruneReads(t testing.TB, state fairway.State, olderThan time.Duration, limit int) (pruned int, reads map[string][2]int64) {
	ctx := t.Context()
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(ctx)) }()
	pruned, err = prune(ctx, tx, state, olderThan, "", limit)
	require.NoError(t, err)
	rows, err := tx.Query(ctx, `SELECT relname, coalesce(seq_tup_read, 0), coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables
 WHERE relname IN ('fairway_record', 'fairway_job_id', 'fairway_job_log')`)
	require.NoError(t, err)
	reads = map[string][2]int64{}
	var name string
	var seq, idx int64
	_, err = pgx.ForEachRow(rows, []any{&name, &seq, &idx}, func() error {
		reads[name] = [2]int64{seq, idx}
		return nil
	})
	require.NoError(t, err)
	return pruned, reads
}
