package coordinator_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// TestOneCoordinatorLeadsTheMaintenance: of two coordinators on one
// database, exactly one leads the maintenance loops; when it stops, the
// other takes over at its next try (it gave the lead up), not after the
// lease.
func TestOneCoordinatorLeadsTheMaintenance(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, nc := natstest.Start(t)
	st := storetest.Open(t)
	first, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, first.Start(ctx))
	require.True(t, first.LeadsMaintenance(), "a coordinator alone leads from its start")
	second, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, second.Start(ctx))
	t.Cleanup(second.Stop)
	// Over three of the second's tries, the first keeps the lead and the
	// second never has it.
	var changed atomic.Bool
	tries := second.MaintenanceTries()
	require.Eventually(t, func() bool {
		if !first.LeadsMaintenance() || second.LeadsMaintenance() {
			changed.Store(true)
		}
		return second.MaintenanceTries() >= tries+3
	}, waitTimeout, 20*time.Millisecond, "the second tries to lead")
	require.False(t, changed.Load(), "the lead changed hands, or two coordinators led")
	first.Stop()
	require.Eventually(t, second.LeadsMaintenance, waitTimeout, 20*time.Millisecond, "the second takes the lead the first gave up")
}
