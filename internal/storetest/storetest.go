// Package storetest gives tests a migrated Fairway database on a real
// PostgreSQL: one throwaway cluster per test binary (internal/pgtest), a
// fresh database per test, cloned from a template migrated once.
package storetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fairwayhq/fairway/internal/pgserver"
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

// OwnCluster returns a store on a migrated database in a PostgreSQL
// cluster of its own, and the URL of that cluster's superuser on its
// postgres database, for a test that changes what every database of a
// server shares (ALTER SYSTEM). The cluster is stopped and removed when
// t ends. It costs an initdb, a second or two.
func OwnCluster(t testing.TB) (s *store.Store, adminURL string) {
	t.Helper()
	ctx := t.Context()
	base, err := os.MkdirTemp("", "fairway-own-cluster-")
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	// Run as root, PostgreSQL runs as another user, which must enter base.
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	srv, err := pgserver.Start(ctx, pgserver.Options{Dir: filepath.Join(base, "pg"), Database: "fairway"})
	if err != nil {
		t.Fatalf("storetest: starting a cluster of the test's own: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
	s, err = store.Open(ctx, srv.URL(), store.Options{})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return s, srv.URLFor("postgres")
}
