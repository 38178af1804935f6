// The maintenance leader (see 012_leader.sql).

package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/leader_acquire.sql
	leaderAcquireSQL string
	//go:embed sql/leader_release.sql
	leaderReleaseSQL string
)

// LeadMaintenance takes or renews the maintenance lead for holder for
// ttl, on PostgreSQL's clock. It returns the lead's term (it grows with
// each new holder) and whether holder leads now; false when another
// holder's lease has not run out.
func (s *Store) LeadMaintenance(ctx context.Context, holder string, ttl time.Duration) (term int64, leads bool, err error) {
	err = s.pool.QueryRow(ctx, leaderAcquireSQL, holder, interval(ttl)).Scan(&term)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("taking the maintenance lead: %w", interpretError(err))
	}
	return term, true, nil
}

// ReleaseMaintenance gives up holder's maintenance lead, if it holds it.
func (s *Store) ReleaseMaintenance(ctx context.Context, holder string) error {
	if _, err := s.pool.Exec(ctx, leaderReleaseSQL, holder); err != nil {
		return fmt.Errorf("giving up the maintenance lead: %w", interpretError(err))
	}
	return nil
}
