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

// TestADatabaseKeepsTheEngineItsFirstCoordinatorChose: the first engine
// recorded is the database's; the same again is fine, the other is
// refused with what to do.
func TestADatabaseKeepsTheEngineItsFirstCoordinatorChose(t *testing.T) {
	t.Parallel()
	s := storetest.OpenJournal(t)
	for _, name := range []string{store.EngineJournal, store.EngineJournal, ""} {
		engine, err := s.ChooseEngine(t.Context(), name)
		require.NoError(t, err)
		require.Equal(t, store.EngineJournal, engine)
	}
	_, err := s.ChooseEngine(t.Context(), store.EngineRows)
	require.ErrorContains(t, err, `coordinator.engine is "rows", but this database's jobs are stored by the "journal" engine`)
	require.ErrorContains(t, err, `set coordinator.engine to "journal", or use another database`)
}

// TestAJournalDatabaseShedsTheRowEnginesIndexes: once a database's engine
// is the journal, fairway_job (its records) keeps the primary key, the
// finished and dependents indexes, and one empty index of the unfinished
// states instead of the row engine's eight; a database on the row engine
// keeps them all. Choosing again changes nothing.
func TestAJournalDatabaseShedsTheRowEnginesIndexes(t *testing.T) {
	t.Parallel()
	indexes := func(s *store.Store) []string {
		rows, err := s.Pool().Query(t.Context(), `SELECT indexname FROM pg_indexes WHERE tablename = 'fairway_job' ORDER BY 1`)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}
	rows := storetest.Open(t)
	_, err := rows.ChooseEngine(t.Context(), store.EngineRows)
	require.NoError(t, err)
	require.Contains(t, indexes(rows), "fairway_job_eligible")
	require.NotContains(t, indexes(rows), "fairway_job_live")
	require.False(t, rows.OnJournal())

	journal := storetest.OpenJournal(t)
	for range 2 {
		_, err := journal.ChooseEngine(t.Context(), store.EngineJournal)
		require.NoError(t, err)
		require.Equal(t, []string{"fairway_job_dependents", "fairway_job_finished", "fairway_job_group_seq", "fairway_job_live", "fairway_job_pkey", "fairway_job_seq"}, indexes(journal))
		require.True(t, journal.OnJournal())
	}

	// Once shed, a coordinator's start takes no lock for it: a reader of
	// the log (or of the records) does not hold it back.
	tx, err := journal.Pool().Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(t.Context()) }()
	_, err = tx.Exec(t.Context(), `LOCK TABLE fairway_job_log, fairway_job IN ACCESS SHARE MODE`)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err = journal.ChooseEngine(ctx, store.EngineJournal)
	require.NoError(t, err, "a start waited for a lock it did not need")
}

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

// TestCoordinatorsStartingTogetherShedTogether: two coordinators that
// start on a new journal database at the same moment both shed the row
// engine's indexes without error. Their DDL deadlocked now and then
// (fault scenario journal-kill-leader-mid-claim: a coordinator exited at
// its start), before the shedding took a lock of its own.
func TestCoordinatorsStartingTogetherShedTogether(t *testing.T) {
	t.Parallel()
	for range 8 {
		first, url := storetest.OpenJournalURL(t)
		second, err := store.Open(t.Context(), url, store.Options{})
		require.NoError(t, err)
		t.Cleanup(second.Close)
		errs := make(chan error, 2)
		for _, s := range []*store.Store{first, second} {
			go func() { _, err := s.ChooseEngine(t.Context(), store.EngineJournal); errs <- err }()
		}
		require.NoError(t, <-errs)
		require.NoError(t, <-errs)
	}
}

// TestANewDatabasesEngine: a coordinator that names no engine gets
// store.EngineNew on a new database, and so does a transaction of
// store.InsertTx that comes first (in that transaction: rolled back, the
// database has no engine yet); a coordinator that names the other is then
// refused.
func TestANewDatabasesEngine(t *testing.T) {
	t.Parallel()
	other := store.EngineJournal
	if store.EngineNew == store.EngineJournal {
		other = store.EngineRows
	}
	s := storetest.OpenJournal(t) // no engine yet
	engine, err := s.ChooseEngine(t.Context(), "")
	require.NoError(t, err)
	require.Equal(t, store.EngineNew, engine)
	require.Equal(t, store.EngineNew == store.EngineJournal, s.OnJournal())

	tx := storetest.OpenJournal(t)
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
	recorded := func() string {
		var engine string
		err := tx.Pool().QueryRow(t.Context(), `SELECT coalesce((SELECT engine FROM fairway_engine), '')`).Scan(&engine)
		require.NoError(t, err)
		return engine
	}
	stored(false)
	require.Empty(t, recorded(), "a rolled-back InsertTx chose an engine")
	stored(true)
	require.Equal(t, store.EngineNew, recorded())
	_, err = tx.ChooseEngine(t.Context(), other)
	require.ErrorContains(t, err, `this database's jobs are stored by the "`+store.EngineNew+`" engine`)
}

// TestADatabaseWithJobsKeepsTheRows: migration 025 records the row
// engine for a database that held jobs before the journal was the
// default, and no engine for one that held none.
func TestADatabaseWithJobsKeepsTheRows(t *testing.T) {
	t.Parallel()
	remigrate := func(s *store.Store) string {
		t.Helper()
		_, err := s.Pool().Exec(t.Context(), `DELETE FROM fairway_migration WHERE version = 25`)
		require.NoError(t, err)
		applied, err := s.Migrate(t.Context())
		require.NoError(t, err)
		require.Equal(t, []int{25}, applied)
		var engine string
		err = s.Pool().QueryRow(t.Context(), `SELECT coalesce((SELECT engine FROM fairway_engine), '')`).Scan(&engine)
		require.NoError(t, err)
		return engine
	}
	empty := storetest.OpenJournal(t)
	require.Empty(t, remigrate(empty))

	old := storetest.OpenJournal(t) // no engine recorded, as before migration 021
	_, err := old.InsertJobs(t.Context(), []fairway.Submission{job("g", "")}, nil)
	require.NoError(t, err)
	require.Equal(t, store.EngineRows, remigrate(old))
	engine, err := old.ChooseEngine(t.Context(), "")
	require.NoError(t, err)
	require.Equal(t, store.EngineRows, engine, "a coordinator naming no engine on a database of rows")
}
