package store_test

import (
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// TestTheJournalsBodiesAreCompressedWithLZ4 (migration 022), on a server
// that has lz4; pglz stays on one that has not.
func TestTheJournalsBodiesAreCompressedWithLZ4(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	want := "l"
	if _, err := s.Pool().Exec(t.Context(), `CREATE TEMP TABLE lz4_probe (b bytea COMPRESSION lz4)`); err != nil {
		want = "" // the default, pglz
	}
	for _, table := range []string{"fairway_journal", "fairway_journal_snapshot"} {
		var method string
		err := s.Pool().QueryRow(t.Context(), `SELECT attcompression::text FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'body'`, table).Scan(&method)
		require.NoError(t, err)
		require.Equal(t, want, method, "%s.body", table)
	}
}

// TestANewDatabaseIsOnTheJournal: OpenJournal records the journal on a
// database without an engine, again and again without change, and so
// does a transaction of store.InsertTx that comes first (in that
// transaction: rolled back, the database has no engine yet).
func TestANewDatabaseIsOnTheJournal(t *testing.T) {
	t.Parallel()
	engine := func(s *store.Store) string {
		t.Helper()
		var e string
		require.NoError(t, s.Pool().QueryRow(t.Context(), `SELECT coalesce((SELECT engine FROM fairway_engine), '')`).Scan(&e))
		return e
	}
	s := storetest.Open(t)
	require.Empty(t, engine(s))
	for range 2 {
		require.NoError(t, s.OpenJournal(t.Context()))
		require.Equal(t, store.EngineJournal, engine(s))
	}

	tx := storetest.Open(t)
	stored := func(commit bool) {
		t.Helper()
		app, err := tx.Pool().Begin(t.Context())
		require.NoError(t, err)
		_, err = store.InsertTx(t.Context(), app, store.TxOptions{}, fairway.Submission{Group: "g", Task: "t"})
		require.NoError(t, err)
		if commit {
			require.NoError(t, app.Commit(t.Context()))
		} else {
			require.NoError(t, app.Rollback(t.Context()))
		}
	}
	stored(false)
	require.Empty(t, engine(tx), "rolled back")
	stored(true)
	require.Equal(t, store.EngineJournal, engine(tx))
}

// TestADatabaseOfTheRowEngineIsRefused: a database whose first
// coordinator ran the row engine (before 2026-11-30) is refused by a
// coordinator's start and by store.InsertTx, with what to do; nothing is
// stored.
func TestADatabaseOfTheRowEngineIsRefused(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	_, err := s.Pool().Exec(t.Context(), `INSERT INTO fairway_engine (engine) VALUES ('rows')`)
	require.NoError(t, err)
	err = s.OpenJournal(t.Context())
	require.ErrorContains(t, err, "this database's jobs are stored by the row engine")
	require.ErrorContains(t, err, "run 'fairway migrate --to-journal --database-url …'")

	tx, err := s.Pool().Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(t.Context()) }()
	_, err = store.InsertTx(t.Context(), tx, store.TxOptions{}, fairway.Submission{Group: "g", Task: "t"})
	require.ErrorContains(t, err, "fairway migrate --to-journal")
	require.NoError(t, tx.Rollback(t.Context()))
	var rows int
	require.NoError(t, s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM fairway_journal`).Scan(&rows))
	require.Zero(t, rows)
}

// TestCoordinatorsStartingTogetherOpenTogether: two coordinators that
// start on a new database at the same moment both open it on the journal
// without error. (Until migration 027 they also shed the row engine's
// indexes, whose DDL deadlocked now and then before it took a lock of its
// own: fault scenario journal-kill-leader-mid-claim.)
func TestCoordinatorsStartingTogetherOpenTogether(t *testing.T) {
	t.Parallel()
	for range 8 {
		first, url := storetest.OpenURL(t)
		second, err := store.Open(t.Context(), url, store.Options{})
		require.NoError(t, err)
		t.Cleanup(second.Close)
		errs := make(chan error, 2)
		for _, s := range []*store.Store{first, second} {
			go func() { errs <- s.OpenJournal(t.Context()) }()
		}
		require.NoError(t, <-errs)
		require.NoError(t, <-errs)
	}
}
