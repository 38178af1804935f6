package store

// Test hooks: move a job's clock forward without waiting.

import (
	"strings"
	"testing"
	"time"

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

// BatchPlans returns the plans PostgreSQL chooses for the statements that
// apply executors' reports (starts, progress, outcomes) to the attempts
// given, by statement name.
func (s *Store) BatchPlans(t testing.TB, atts []Attempt) map[string]string {
	ids, attempts, workers := attemptArrays(atts)
	n := len(atts)
	outcomes, texts, progress := make([]string, n), make([]string, n), make([]int32, n)
	results, started := make([][]byte, n), make([]*time.Time, n)
	for i := range outcomes {
		outcomes[i], progress[i] = "success", 50
	}
	plans := map[string]string{}
	explain := func(name, sql string, args ...any) {
		rows, err := s.pool.Query(t.Context(), "EXPLAIN "+sql, args...)
		require.NoError(t, err)
		var lines []string
		for rows.Next() {
			var l string
			require.NoError(t, rows.Scan(&l))
			lines = append(lines, l)
		}
		require.NoError(t, rows.Err())
		plans[name] = strings.Join(lines, "\n")
	}
	explain("complete", completeSQL, ids, attempts, workers, outcomes, results, texts, interval(time.Second), started)
	explain("mark_running", markRunningSQL, ids, attempts, workers)
	explain("set_progress", setProgressSQL, ids, attempts, workers, progress)
	return plans
}
