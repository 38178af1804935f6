package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func setup(t *testing.T) (*store.Store, context.Context) {
	t.Helper()
	return storetest.Open(t), t.Context()
}

// TestMaintenanceLead: one holder at a time; the holder renews it under
// the same term; another takes it once it is given up or its lease runs
// out, under the next term.
func TestMaintenanceLead(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	term, leads, err := s.LeadMaintenance(ctx, "a", time.Minute)
	require.NoError(t, err)
	require.True(t, leads)
	_, leads, err = s.LeadMaintenance(ctx, "b", time.Minute)
	require.NoError(t, err)
	require.False(t, leads, "a holds it")
	again, leads, err := s.LeadMaintenance(ctx, "a", time.Minute)
	require.NoError(t, err)
	require.True(t, leads)
	require.Equal(t, term, again, "renewed under the same term")
	require.NoError(t, s.ReleaseMaintenance(ctx, "b"), "b holds nothing to give up")
	_, leads, err = s.LeadMaintenance(ctx, "b", time.Minute)
	require.NoError(t, err)
	require.False(t, leads)
	require.NoError(t, s.ReleaseMaintenance(ctx, "a"))
	next, leads, err := s.LeadMaintenance(ctx, "b", 50*time.Millisecond)
	require.NoError(t, err)
	require.True(t, leads)
	require.Equal(t, term+1, next)
	// b's short lease runs out: a takes it back, under the next term.
	require.Eventually(t, func() bool {
		_, leads, err := s.LeadMaintenance(ctx, "a", time.Minute)
		return err == nil && leads
	}, 5*time.Second, 20*time.Millisecond)
}
