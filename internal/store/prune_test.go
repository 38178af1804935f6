package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPruneUsesItsIndex: the prune statement finds the batches of records
// old enough through their index of end times, not by reading every
// batch.
func TestPruneUsesItsIndex(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	_, err := s.Pool().Exec(t.Context(), `INSERT INTO fairway_record (finished, keys, groups, s_groups, s_tasks, s_states, s_started, s_due, jobs)
SELECT now() - i * interval '1 second', '{}', '{g}', '{}', '{}', '{}', '{}', '{}', '[]' FROM generate_series(1, 5000) AS i`)
	require.NoError(t, err)
	_, err = s.Pool().Exec(t.Context(), `ANALYZE fairway_record`)
	require.NoError(t, err)
	require.Contains(t, s.PrunePlan(t), "fairway_record_finished")
}
