package store

// Test hooks: the internals the tests read.

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// CheckMigrationNames exposes checkMigrationNames.
var CheckMigrationNames = checkMigrationNames

// PrunePlan is the plan of the prune statement.
func (s *Store) PrunePlan(t testing.TB) string {
	rows, err := s.pool.Query(t.Context(), "EXPLAIN "+pruneSQL, "success", "1 day", "", 1000)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}
