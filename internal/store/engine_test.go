package store_test

import (
	"testing"

	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// TestADatabaseKeepsTheEngineItsFirstCoordinatorChose: the first engine
// recorded is the database's; the same again is fine, the other is
// refused with what to do.
func TestADatabaseKeepsTheEngineItsFirstCoordinatorChose(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	require.NoError(t, s.ChooseEngine(t.Context(), store.EngineJournal))
	require.NoError(t, s.ChooseEngine(t.Context(), store.EngineJournal))
	err := s.ChooseEngine(t.Context(), store.EngineRows)
	require.ErrorContains(t, err, `coordinator.engine is "rows", but this database's jobs are stored by the "journal" engine`)
	require.ErrorContains(t, err, `set coordinator.engine to "journal", or use another database`)
}
