package pgserver_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fairwayhq/fairway/internal/pgserver"
)

// withPassword returns rawURL with its password replaced (none if "").
func withPassword(t *testing.T, rawURL, password string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	if password == "" {
		u.User = url.User(u.User.Username())
	} else {
		u.User = url.UserPassword(u.User.Username(), password)
	}
	return u.String()
}

// requireRefused checks that the superuser cannot connect without its
// password, over TCP and over the unix socket, nor with a wrong one.
func requireRefused(t *testing.T, s *pgserver.Server, dir string) {
	t.Helper()
	for _, u := range []string{
		withPassword(t, s.URL(), ""),
		withPassword(t, s.URL(), "wrong"),
		"host=" + dir + " port=" + strconv.Itoa(s.Port()) + " user=fairway dbname=postgres sslmode=disable",
	} {
		conn, err := pgx.Connect(t.Context(), u)
		if err == nil {
			_ = conn.Close(context.Background())
		}
		require.Error(t, err, "connecting with %s", u)
		require.Contains(t, err.Error(), "password", u)
	}
}

// TestSuperuserNeedsItsPassword: a new cluster's superuser has a random
// password, in a file only its owner can read; without it no one gets in.
func TestSuperuserNeedsItsPassword(t *testing.T) {
	t.Parallel()
	dir := dataDir(t, "pg")
	s, _ := start(t, pgserver.Options{Dir: dir})

	fi, err := os.Stat(dir + ".password")
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	data, err := os.ReadFile(dir + ".password")
	require.NoError(t, err)
	password := strings.TrimSpace(string(data))
	require.Len(t, password, 48)
	u, err := url.Parse(s.URL())
	require.NoError(t, err)
	got, _ := u.User.Password()
	require.Equal(t, password, got, "the URL carries the password")

	conn := connect(t, s.URL())
	var one int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT 1").Scan(&one))
	requireRefused(t, s, dir)
}

// TestTrustingClusterGetsAPassword: a cluster made by an older version,
// which trusted local connections and has no password file, gets a
// password at start and keeps its data.
func TestTrustingClusterGetsAPassword(t *testing.T) {
	t.Parallel()
	dir := dataDir(t, "pg")
	s, _ := start(t, pgserver.Options{Dir: dir})
	conn := connect(t, s.URL())
	_, err := conn.Exec(t.Context(), "CREATE TABLE kept (id int); ALTER ROLE fairway PASSWORD NULL")
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
	require.NoError(t, s.Stop())
	// What older versions left: initdb --auth=trust, no password file.
	hba := filepath.Join(dir, "pg_hba.conf")
	require.NoError(t, os.WriteFile(hba, []byte("local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n"), 0o600))
	require.NoError(t, os.Remove(dir+".password"))

	s2, logs := start(t, pgserver.Options{Dir: dir})
	require.Contains(t, logs.String(), "giving it one")
	fi, err := os.Stat(dir + ".password")
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	conn = connect(t, s2.URL())
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*) FROM kept").Scan(&n))
	requireRefused(t, s2, dir)
	data, err := os.ReadFile(hba)
	require.NoError(t, err)
	require.NotContains(t, string(data), "trust")
}

// TestLostPasswordFile: a cluster that requires a password whose file is
// gone cannot start, and the error says what to do.
func TestLostPasswordFile(t *testing.T) {
	t.Parallel()
	dir := dataDir(t, "pg")
	s, _ := start(t, pgserver.Options{Dir: dir})
	require.NoError(t, s.Stop())
	require.NoError(t, os.Remove(dir+".password"))
	_, err := pgserver.Start(t.Context(), pgserver.Options{Dir: dir})
	require.ErrorContains(t, err, "needs the superuser's password, which "+dir+".password no longer holds")
	require.ErrorContains(t, err, "remove "+dir)
}
