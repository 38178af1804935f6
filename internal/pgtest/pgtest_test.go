package pgtest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/fairwayhq/fairway/internal/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.SetTemplate(func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		// Deliberately left open: pgtest must cope with connections prepare leaves behind.
		_, err = conn.Exec(ctx, "CREATE TABLE jobs (id bigint PRIMARY KEY, name text NOT NULL)")
		return err
	})
	pgtest.Main(m)
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func countJobs(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*) FROM jobs").Scan(&n))
	return n
}

func TestDatabasesAreIndependent(t *testing.T) {
	t.Parallel()
	urlA, urlB := pgtest.NewDB(t), pgtest.NewDB(t)
	require.NotEqual(t, urlA, urlB)
	a, b := connect(t, urlA), connect(t, urlB)

	_, err := a.Exec(t.Context(), "INSERT INTO jobs VALUES (1, 'only in a')")
	require.NoError(t, err)
	require.Equal(t, 1, countJobs(t, a))
	require.Equal(t, 0, countJobs(t, b), "b has the template's table but not a's row")
}

func TestConcurrentNewDB(t *testing.T) {
	t.Parallel()
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			conn := connect(t, pgtest.NewDB(t))
			require.Equal(t, 0, countJobs(t, conn))
		})
	}
}

func TestDatabaseDroppedAfterTest(t *testing.T) {
	t.Parallel()
	var url string
	t.Run("uses a database", func(t *testing.T) {
		url = pgtest.NewDB(t)
		connect(t, url)
	})
	_, err := pgx.Connect(t.Context(), url)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "connecting to a dropped database: %v", err)
	require.Equal(t, "3D000", pgErr.Code) // invalid_catalog_name: database does not exist
}
