package coordinator_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/internal/journal"
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
	oneCoordinatorLeadsTheMaintenance(t)
}

func oneCoordinatorLeadsTheMaintenance(t *testing.T) {
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

// TestOnlyTheJournalsLeaderLeadsTheMaintenance: on the journal, the
// maintenance (whose sweeper has the journal's leader release the jobs of
// lost executors) is led by the coordinator that leads the journal's
// partition, never by another: a coordinator that led the maintenance
// while another led the journal left a restarted executor's jobs held for
// ever (fault scenario kill-restart-executor, 15 jobs lost).
func TestOnlyTheJournalsLeaderLeadsTheMaintenance(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, nc := natstest.Start(t)
	st := storetest.Open(t)
	// Another coordinator holds the journal's partition, for a minute.
	_, ok, err := journal.Acquire(ctx, st.Pool(), 0, "another coordinator", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	c, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	t.Cleanup(c.Stop)
	tries := c.MaintenanceTries()
	var led atomic.Bool
	require.Eventually(t, func() bool {
		if c.LeadsMaintenance() {
			led.Store(true)
		}
		return c.MaintenanceTries() >= tries+3
	}, waitTimeout, 20*time.Millisecond, "the coordinator tries to lead")
	require.False(t, led.Load(), "led the maintenance without the journal's partition")

	// The other's lease runs out: this coordinator leads both.
	_, err = st.Pool().Exec(ctx, `UPDATE fairway_journal_lease SET until = now() WHERE partition = 0`)
	require.NoError(t, err)
	require.Eventually(t, c.LeadsMaintenance, waitTimeout, 20*time.Millisecond, "the journal's new leader leads the maintenance")
}

// TestAStoppedCoordinatorGivesTheJournalsLeaseUp: a coordinator that
// stops gives the journal's lease up (it runs out now, with no holder), so
// that a follower takes it at its next try, not once it has run out.
func TestAStoppedCoordinatorGivesTheJournalsLeaseUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, nc := natstest.Start(t)
	st := storetest.Open(t)
	c, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	require.Eventually(t, func() bool {
		holder, err := journal.LeaseHolder(ctx, st.Pool(), 0)
		require.NoError(t, err)
		return holder != ""
	}, waitTimeout, 20*time.Millisecond, "the coordinator leads the journal's partition")
	c.Stop()
	var holder string
	var ranOut bool
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT holder, until <= now() FROM fairway_journal_lease WHERE partition = 0`).Scan(&holder, &ranOut))
	require.Empty(t, holder)
	require.True(t, ranOut, "the lease ran out when the coordinator stopped")
}

// TestAJournalLeaseTTLTooShortIsRefused: a lease renewed every third of
// a TTL below 300 ms would be renewed more often than PostgreSQL answers
// on a loaded machine; a negative one is nonsense. New says which field.
func TestAJournalLeaseTTLTooShortIsRefused(t *testing.T) {
	t.Parallel()
	_, nc := natstest.Start(t)
	st := storetest.Open(t)
	for _, ttl := range []time.Duration{-time.Second, 100 * time.Millisecond} {
		_, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{JournalLeaseTTL: ttl, Logger: testLogger(t)})
		require.ErrorContains(t, err, "journal lease TTL "+ttl.String()+": must be 0 (1.5s) or at least 300ms")
	}
	_, err := coordinator.New(storetest.Public(st), nc, coordinator.Config{JournalLeaseTTL: 300 * time.Millisecond, Logger: testLogger(t)})
	require.NoError(t, err)
}
