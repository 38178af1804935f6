// Package storetest gives tests a migrated Fairway database on a real
// PostgreSQL: one throwaway cluster per test binary (internal/pgtest), a
// fresh database per test, cloned from a template migrated once.
package storetest

import (
	"context"
	"testing"

	"github.com/fairwayhq/fairway/internal/pgtest"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storeaccess"
	public "github.com/fairwayhq/fairway/store"
)

// Public wraps the engine s in the public *store.Store that coordinator.New
// takes. Closing either closes both.
func Public(s *store.Store) *public.Store {
	return storeaccess.Public(s).(*public.Store)
}

// Main runs the tests of a package that uses Open. Call it from TestMain.
func Main(m *testing.M) {
	pgtest.SetTemplate(func(ctx context.Context, url string) error {
		s, err := store.Open(ctx, url, store.Options{})
		if err != nil {
			return err
		}
		defer s.Close()
		_, err = s.Migrate(ctx)
		return err
	})
	pgtest.Main(m)
}

// Open returns a store on a fresh, migrated database, closed when t
// ends. No engine is recorded yet: the first coordinator, or
// store.InsertTx, records the journal, as on a new user's database.
func Open(t testing.TB) *store.Store {
	t.Helper()
	s, _ := OpenURL(t)
	return s
}

// OpenURL is Open that also returns the database's URL, for a test that
// connects to it as an application would.
func OpenURL(t testing.TB) (*store.Store, string) {
	t.Helper()
	url := pgtest.NewDB(t)
	s, err := store.Open(context.Background(), url, store.Options{})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(s.Close)
	return s, url
}
