package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/jackc/pgx/v5"
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

// TestTheJournalShedsTheRowEnginesIndexes: on the journal, fairway_job
// (its records) keeps the primary key, the finished and dependents
// indexes, and one empty index of the unfinished states, instead of the
// row engine's eight (a database moved from the rows had them). Opening
// again changes nothing, and takes no lock once they are shed: a reader
// of the log (or of the records) does not hold a start back.
func TestTheJournalShedsTheRowEnginesIndexes(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	indexes := func() []string {
		rows, err := s.Pool().Query(t.Context(), `SELECT indexname FROM pg_indexes WHERE tablename = 'fairway_job' ORDER BY 1`)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}
	require.Contains(t, indexes(), "fairway_job_eligible", "the migrations make the row engine's indexes")
	for range 2 {
		require.NoError(t, s.OpenJournal(t.Context()))
		require.Equal(t, []string{"fairway_job_dependents", "fairway_job_finished", "fairway_job_group_seq", "fairway_job_live", "fairway_job_pkey", "fairway_job_seq"}, indexes())
	}
	tx, err := s.Pool().Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(t.Context()) }()
	_, err = tx.Exec(t.Context(), `LOCK TABLE fairway_job_log, fairway_job IN ACCESS SHARE MODE`)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	require.NoError(t, s.OpenJournal(ctx), "a start waited for a lock it did not need")
}

// TestCoordinatorsStartingTogetherShedTogether: two coordinators that
// start on a new database at the same moment both shed the row engine's
// indexes without error. Their DDL deadlocked now and then (fault
// scenario journal-kill-leader-mid-claim: a coordinator exited at its
// start), before the shedding took a lock of its own.
func TestCoordinatorsStartingTogetherShedTogether(t *testing.T) {
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
