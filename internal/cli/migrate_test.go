package cli_test

import (
	"testing"

	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/stretchr/testify/require"
)

// TestMigrateToJournal: 'fairway migrate --to-journal' moves a database
// of the row engine onto the journal, saying what it moved; it refuses
// while a coordinator runs (nothing moved), and says so when there is
// nothing to move.
func TestMigrateToJournal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, url := storetest.OpenURL(t) // no engine yet
	// A database of the row engine: its engine recorded, a job's row as
	// that engine wrote it.
	_, err := st.Pool().Exec(ctx, `INSERT INTO fairway_engine (engine) VALUES ('rows')`)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `INSERT INTO fairway_job_row (id, task, group_name, args, priority, state, max_retries, run_at, submitted)
		VALUES ('j1', 'echo', 'acme', '{}', 'low', 'waiting', 3, now(), now())`)
	require.NoError(t, err)

	code, out, errOut := run(t, "migrate", "--database-url", url)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "this database's jobs are stored by the row engine, which this version no longer runs: stop every coordinator and run 'fairway migrate --to-journal'")

	_, err = st.Pool().Exec(ctx, `UPDATE fairway_leader SET holder = 'c1', until = now() + interval '1 minute'`)
	require.NoError(t, err)
	code, _, errOut = run(t, "migrate", "--to-journal", "--database-url", url)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "a coordinator runs on this database (coordinator c1 leads its maintenance until")
	require.Contains(t, errOut, "stop every coordinator first")
	_, err = st.Pool().Exec(ctx, `UPDATE fairway_leader SET until = now() - interval '1 second'`)
	require.NoError(t, err)

	code, out, errOut = run(t, "migrate", "--to-journal", "--database-url", url)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "1 unfinished jobs written to the journal")
	require.Contains(t, out, "the database is on the journal engine: 1 unfinished jobs moved (0 held by executors, which run again), 0 cancelled")
	var engine string
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT engine FROM fairway_engine`).Scan(&engine))
	require.Equal(t, store.EngineJournal, engine)

	code, _, errOut = run(t, "migrate", "--to-journal", "--database-url", url)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "this database is on the journal engine already: nothing to move")

	// A new database: the journal recorded as its engine, nothing moved.
	fresh, freshURL := storetest.OpenURL(t)
	code, out, errOut = run(t, "migrate", "--to-journal", "--database-url", freshURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "the database is on the journal engine: 0 unfinished jobs moved")
	require.NoError(t, fresh.Pool().QueryRow(ctx, `SELECT engine FROM fairway_engine`).Scan(&engine))
	require.Equal(t, store.EngineJournal, engine)
}

// TestMigrateRecordsThePartitions: 'fairway migrate' creates a cluster
// with its partitions and their databases, and then refuses another
// count; a coordinator refuses more than one partition before it records
// anything.
func TestMigrateRecordsThePartitions(t *testing.T) {
	t.Parallel()
	_, home := storetest.OpenURL(t)
	_, other := storetest.OpenURL(t)

	code, out, errOut := run(t, "migrate", "--database-url", home, "--partitions", "4", "--partition-urls", "3="+other+" 1="+other)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `partitions \[1 3\]'s database \S+ is up to date`, out)
	require.Regexp(t, `cluster [0-9a-f-]{36}: 4 partition\(s\), created `, out)

	code, _, errOut = run(t, "migrate", "--database-url", home)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "database.partitions is 1, but this cluster was created with 4 partitions")

	// Partition 1 back in the home database: allowed while its journal
	// holds nothing (the store's tests refuse a move that leaves one).
	code, out, errOut = run(t, "migrate", "--database-url", home, "--partitions", "4", "--partition-urls", "3="+other)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `partitions \[3\]'s database \S+ is up to date`, out)
}
