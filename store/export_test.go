package store

// Test hooks: move a job's clock forward without waiting.

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// SetDue makes a job's run_at now.
func (s *Store) SetDue(t testing.TB, id string) {
	_, err := s.pool.Exec(t.Context(), "UPDATE fairway_job SET run_at = now() - interval '1 millisecond' WHERE id = $1", id)
	require.NoError(t, err)
}

// ExpireLease makes a job's lease run out.
func (s *Store) ExpireLease(t testing.TB, id string) {
	_, err := s.pool.Exec(t.Context(), "UPDATE fairway_job SET lease_until = now() - interval '1 second' WHERE id = $1", id)
	require.NoError(t, err)
}

// SilenceExecutor makes an executor's last heartbeat an hour old.
func (s *Store) SilenceExecutor(t testing.TB, appID string) {
	_, err := s.pool.Exec(t.Context(), "UPDATE fairway_executor SET last_heartbeat = now() - interval '1 hour' WHERE app_id = $1", appID)
	require.NoError(t, err)
}

// Backdate moves a job's trigger_after and expires_at (those that are set)
// into the past.
func (s *Store) Backdate(t testing.TB, id string) {
	_, err := s.pool.Exec(t.Context(), `UPDATE fairway_job SET trigger_after = trigger_after - interval '100 years',
		expires_at = expires_at - interval '100 years' WHERE id = $1`, id)
	require.NoError(t, err)
}
