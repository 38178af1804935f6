package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPruneUsesItsIndex: the prune statement reads the index of final
// jobs, not the whole table.
func TestPruneUsesItsIndex(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	require.Contains(t, s.PrunePlan(t), "fairway_job_finished")
}
