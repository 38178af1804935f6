// Package storetest gives tests a migrated Fairway database on a real
// PostgreSQL: one throwaway cluster per test binary (internal/pgtest), a
// fresh database per test, cloned from a template migrated once.
package storetest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
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
		if _, err := s.Migrate(ctx); err != nil {
			return err
		}
		// Every test's database mirrors the row engine's changes into the
		// journal, and OpenURL checks the fold against them at the end.
		return s.MirrorJournal(ctx)
	})
	pgtest.Main(m)
}

// Open returns a store on a fresh, migrated database of the row engine
// (recorded as the database's: a coordinator that names no engine runs
// it), closed when t ends. The row engine's changes are mirrored into the
// journal, and the journal's fold of them is checked against the rows at
// the end.
func Open(t testing.TB) *store.Store {
	t.Helper()
	s, _ := OpenURL(t)
	return s
}

// OpenURL is Open that also returns the database's URL, for a test that
// connects to it as an application would.
func OpenURL(t testing.TB) (*store.Store, string) {
	t.Helper()
	return openURL(t, true)
}

// openURL is OpenURL, that checks the journal's mirror at the end when
// mirrored.
func openURL(t testing.TB, mirrored bool) (*store.Store, string) {
	t.Helper()
	url := pgtest.NewDB(t)
	s, err := store.Open(context.Background(), url, store.Options{})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(s.Close)
	if mirrored {
		if _, err := s.ChooseEngine(t.Context(), store.EngineRows); err != nil {
			t.Fatalf("storetest: %v", err)
		}
	}
	// Runs before Close, after the cleanups of whatever the test started
	// on the store (they were registered after this one).
	t.Cleanup(func() {
		if !mirrored || s.HandWritten() {
			return
		}
		// Through a store of its own: the test may have closed s.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		check, err := store.Open(ctx, url, store.Options{})
		if err != nil {
			t.Errorf("storetest: %v", err)
			return
		}
		defer check.Close()
		if err := check.CheckJournalMirror(ctx); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
	return s, url
}

// OpenJournal returns a store on a fresh, migrated database for the
// journal engine, on which no engine is chosen yet: a coordinator there
// names the journal (a coordinator that names none, or store.InsertTx,
// chooses store.EngineNew, as on a new user's database). The mirror that
// writes the row engine's changes into the journal is off (its triggers
// would take the records the journal's leader writes in fairway_job), and
// so is its check at the end.
func OpenJournal(t testing.TB) *store.Store {
	t.Helper()
	s, _ := OpenJournalURL(t)
	return s
}

// OpenJournalURL is OpenJournal that also returns the database's URL.
func OpenJournalURL(t testing.TB) (*store.Store, string) {
	t.Helper()
	s, url := openURL(t, false)
	if _, err := s.Pool().Exec(t.Context(), `ALTER TABLE fairway_job DISABLE TRIGGER USER`); err != nil {
		t.Fatalf("storetest: turning the journal mirror off: %v", err)
	}
	return s, url
}

// Engine is the engine that the suites' default harnesses run on: the
// journal, the engine being built (issue 31), or the row engine with
// FAIRWAY_TEST_ENGINE=rows (for example FAIRWAY_TEST_ENGINE=rows go test
// ./internal/isolation/). Pass it as coordinator.Config's Engine, beside a
// store of OpenEngine.
func Engine() string {
	if os.Getenv("FAIRWAY_TEST_ENGINE") == store.EngineRows {
		return store.EngineRows
	}
	return store.EngineJournal
}

// OpenEngine is Open for engine (store.EngineRows or EngineJournal, as
// coordinator's).
func OpenEngine(t testing.TB, engine string) *store.Store {
	t.Helper()
	s, _ := OpenEngineURL(t, engine)
	return s
}

// OpenEngineURL is OpenEngine that also returns the database's URL.
func OpenEngineURL(t testing.TB, engine string) (*store.Store, string) {
	t.Helper()
	if engine == store.EngineJournal {
		return OpenJournalURL(t)
	}
	return OpenURL(t)
}

// Jobs returns the jobs of group, newest first, with their args and
// results, all of them, in memory (the API lists them a page at a time).
func Jobs(t testing.TB, s *store.Store, group string) []fairway.Job {
	t.Helper()
	var jobs []fairway.Job
	for after := ""; ; {
		next, err := s.ListJobs(t.Context(), store.ListParams{Group: group, Cursor: after, Full: true}, func(j fairway.Job) bool {
			jobs = append(jobs, j)
			return true
		})
		if err != nil {
			t.Fatalf("storetest: listing the jobs of %s: %v", group, err)
		}
		if next == "" {
			return jobs
		}
		after = next
	}
}
