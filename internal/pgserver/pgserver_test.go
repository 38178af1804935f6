package pgserver_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fairwayhq/fairway/internal/pgserver"
)

// dataDir returns a data directory path inside a fresh temporary directory.
// The temporary directory is made world-searchable because, when the tests run
// as root, PostgreSQL runs as the postgres user (t.TempDir's parent is 0700).
func dataDir(t *testing.T, name string) string {
	t.Helper()
	base, err := os.MkdirTemp("", "pgserver-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	return filepath.Join(base, name)
}

// syncBuffer is a bytes.Buffer safe for a slog handler and the test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func start(t *testing.T, opts pgserver.Options) (*pgserver.Server, *syncBuffer) {
	t.Helper()
	var logs syncBuffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	began := time.Now()
	s, err := pgserver.Start(t.Context(), opts)
	require.NoError(t, err, "logs:\n%s", logs.String())
	t.Logf("Start took %v", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() { require.NoError(t, s.Stop()) })
	return s, &logs
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func show(t *testing.T, conn *pgx.Conn, setting string) string {
	t.Helper()
	var v string
	require.NoError(t, conn.QueryRow(t.Context(), "SHOW "+setting).Scan(&v))
	return v
}

func TestStartStopRestart(t *testing.T) {
	t.Parallel()
	dir := dataDir(t, "pg")
	opts := pgserver.Options{Dir: dir, Settings: map[string]string{"work_mem": "8MB"}}

	// Fresh directory: initdb, start, create the default database.
	s, logs := start(t, opts)
	require.Contains(t, logs.String(), "initialising PostgreSQL cluster")
	require.Contains(t, logs.String(), "PostgreSQL ready")
	require.True(t, strings.HasPrefix(s.URL(), "postgres://fairway:"), s.URL())
	require.Contains(t, s.URL(), "@127.0.0.1:")
	require.True(t, strings.HasSuffix(s.URL(), "/fairway?sslmode=disable"), s.URL())

	conn := connect(t, s.URL())
	var one int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
	require.Equal(t, "on", show(t, conn, "fsync"))
	require.Equal(t, "on", show(t, conn, "synchronous_commit"))
	require.Equal(t, "8MB", show(t, conn, "work_mem"))
	require.Equal(t, "127.0.0.1", show(t, conn, "listen_addresses"))
	var db string
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&db))
	require.Equal(t, "fairway", db)
	_, err := conn.Exec(t.Context(), "CREATE TABLE kept (id int)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))

	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop(), "second Stop is a no-op")

	// Same directory again: the existing cluster is reused, no initdb.
	s2, logs := start(t, opts)
	require.NotContains(t, logs.String(), "initialising PostgreSQL cluster")
	require.Contains(t, logs.String(), "PostgreSQL ready")
	conn = connect(t, s2.URL())
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*) FROM kept").Scan(&n))
	require.Zero(t, n)
	require.NoError(t, conn.Close(t.Context()))
	require.NoError(t, s2.Stop())
}

func TestAlreadyRunning(t *testing.T) {
	t.Parallel()
	dir := dataDir(t, "pg")
	s, _ := start(t, pgserver.Options{Dir: dir, Database: "other"})
	require.True(t, strings.HasSuffix(s.URL(), "/other?sslmode=disable"), s.URL())

	_, err := pgserver.Start(t.Context(), pgserver.Options{Dir: dir})
	require.ErrorContains(t, err, "PostgreSQL already running in "+dir)
	require.ErrorContains(t, err, "stop it (kill ")
	require.NotContains(t, err.Error(), "pid file", "a live server's pid file is not to be removed")
}

func TestLongDirUsesTCPOnly(t *testing.T) {
	t.Parallel()
	dir := dataDir(t, strings.Repeat("d", 100)) // too long for a unix socket path
	s, _ := start(t, pgserver.Options{Dir: dir})
	conn := connect(t, s.URL())
	require.Equal(t, "", show(t, conn, "unix_socket_directories"))
}

func TestStartFailureShowsLog(t *testing.T) {
	t.Parallel()
	dir := dataDir(t, "pg")
	_, err := pgserver.Start(t.Context(), pgserver.Options{Dir: dir, Settings: map[string]string{"shared_buffers": "lots"}})
	require.ErrorContains(t, err, "last lines of "+filepath.Join(dir, "postgres.log"))
	require.ErrorContains(t, err, `invalid value for parameter "shared_buffers": "lots"`)
}

func TestNotEmptyDir(t *testing.T) {
	t.Parallel()
	dir := dataDir(t, "pg")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stray"), nil, 0o644))
	_, err := pgserver.Start(t.Context(), pgserver.Options{Dir: dir})
	require.ErrorContains(t, err, "no PG_VERSION")
}

func TestFindBinaries(t *testing.T) {
	t.Parallel()
	dir, err := pgserver.FindBinaries()
	require.NoError(t, err)
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		require.FileExists(t, filepath.Join(dir, name))
	}
}
