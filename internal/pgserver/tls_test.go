package pgserver_test

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/fairwayhq/fairway/internal/pgserver"
	"github.com/fairwayhq/fairway/internal/testcerts"
	"github.com/fairwayhq/fairway/store"
)

// TestTLSVerifyFull starts PostgreSQL with TLS on and only hostssl lines in
// pg_hba.conf, and connects through store.Open as the README says:
// sslmode=verify-full with the CA as sslrootcert.
func TestTLSVerifyFull(t *testing.T) {
	t.Parallel()
	dir := dataDir(t, "pg")
	certDir := filepath.Join(filepath.Dir(dir), "certs")
	require.NoError(t, os.Mkdir(certDir, 0o755))
	ca := testcerts.NewCA(t, certDir, "ca")
	other := testcerts.NewCA(t, certDir, "other-ca")
	srv := ca.Server(t, "server") // for localhost and 127.0.0.1
	// PostgreSQL reads its certificate and key as its own user, and refuses
	// a key file that others may read.
	ownByServerUser(t, srv.CertFile, srv.KeyFile)

	s, logs := start(t, pgserver.Options{
		Dir:      dir,
		Settings: map[string]string{"ssl": "on", "ssl_cert_file": srv.CertFile, "ssl_key_file": srv.KeyFile},
		HBA:      []string{"hostssl all all 127.0.0.1/32 trust"},
	})
	url := func(host, rootCert string) string {
		return fmt.Sprintf("postgres://fairway@%s:%d/fairway?sslmode=verify-full&sslrootcert=%s", host, s.Port(), rootCert)
	}

	for _, host := range []string{"127.0.0.1", "localhost"} {
		st, err := store.Open(t.Context(), url(host, ca.CertFile), store.Options{})
		require.NoError(t, err, "logs:\n%s", logs) // Open pings the server
		st.Close()
	}
	// The connection is encrypted, as the server sees it.
	conn, err := pgx.Connect(t.Context(), url("127.0.0.1", ca.CertFile))
	require.NoError(t, err)
	var ssl bool
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl))
	require.True(t, ssl)
	require.NoError(t, conn.Close(t.Context()))

	// A server certificate from another CA is refused.
	_, err = store.Open(t.Context(), url("127.0.0.1", other.CertFile), store.Options{})
	require.ErrorContains(t, err, "certificate signed by unknown authority")
	// Without TLS the server refuses the connection (hostssl only).
	_, err = store.Open(t.Context(), s.URL(), store.Options{})
	require.ErrorContains(t, err, "no pg_hba.conf entry")
}

// ownByServerUser gives files to the user PostgreSQL runs as: the postgres
// user when the tests run as root, else ourselves already.
func ownByServerUser(t *testing.T, paths ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	u, err := user.Lookup("postgres")
	require.NoError(t, err)
	uid, err := strconv.Atoi(u.Uid)
	require.NoError(t, err)
	gid, err := strconv.Atoi(u.Gid)
	require.NoError(t, err)
	for _, p := range paths {
		require.NoError(t, os.Chown(p, uid, gid))
	}
}
