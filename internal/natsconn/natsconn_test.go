package natsconn_test

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/config"
	"github.com/fairwayhq/fairway/internal/natsconn"
	"github.com/fairwayhq/fairway/internal/testcerts"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"
)

// startServer runs a real NATS server with opts on a free loopback port.
func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoSigs, opts.NoLog = "127.0.0.1", -1, true, true
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	require.True(t, s.ReadyForConnections(10*time.Second), "NATS server not ready")
	return s
}

// connect loads the configuration from env, as the fairway command does,
// and connects with natsconn. A connection that succeeds has made a round
// trip to the server.
func connect(t *testing.T, env ...string) (*nats.Conn, error) {
	t.Helper()
	cfg, err := config.Load("", env, nil)
	require.NoError(t, err)
	nc, err := natsconn.Connect(cfg.NATS, nats.Name("natsconn-test"))
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	require.NoError(t, nc.Flush())
	return nc, nil
}

func urlEnv(s *server.Server) string { return "FAIRWAY_NATS_URL=" + s.ClientURL() }

// urlWith puts userinfo into the server's URL: nats://userinfo@127.0.0.1:port.
func urlWith(s *server.Server, userinfo string) string {
	return "FAIRWAY_NATS_URL=nats://" + userinfo + "@" + s.Addr().String()
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

func requireAuthRefused(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, nats.ErrAuthorization)
}

func TestUserPassword(t *testing.T) {
	t.Parallel()
	s := startServer(t, &server.Options{Username: "fair", Password: "pw-1"})

	_, err := connect(t, urlEnv(s), "FAIRWAY_NATS_USER=fair", "FAIRWAY_NATS_PASSWORD=pw-1")
	require.NoError(t, err)
	_, err = connect(t, urlWith(s, "fair:pw-1")) // in the URL, as before
	require.NoError(t, err)

	_, err = connect(t, urlEnv(s))
	requireAuthRefused(t, err)
	_, err = connect(t, urlEnv(s), "FAIRWAY_NATS_USER=fair", "FAIRWAY_NATS_PASSWORD=wrong")
	requireAuthRefused(t, err)
	require.NotContains(t, err.Error(), "wrong")
}

func TestToken(t *testing.T) {
	t.Parallel()
	s := startServer(t, &server.Options{Authorization: "tok-1"})

	_, err := connect(t, urlEnv(s), "FAIRWAY_NATS_TOKEN=tok-1")
	require.NoError(t, err)
	_, err = connect(t, urlWith(s, "tok-1")) // a token as the URL's user
	require.NoError(t, err)

	_, err = connect(t, urlEnv(s))
	requireAuthRefused(t, err)
	_, err = connect(t, urlEnv(s), "FAIRWAY_NATS_TOKEN=tok-2")
	requireAuthRefused(t, err)
}

func TestNKeySeed(t *testing.T) {
	t.Parallel()
	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := user.PublicKey()
	require.NoError(t, err)
	seed, err := user.Seed()
	require.NoError(t, err)
	other, err := nkeys.CreateUser()
	require.NoError(t, err)
	otherSeed, err := other.Seed()
	require.NoError(t, err)
	s := startServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})

	_, err = connect(t, urlEnv(s), "FAIRWAY_NATS_NKEY="+writeFile(t, "user.nk", seed))
	require.NoError(t, err)

	_, err = connect(t, urlEnv(s))
	requireAuthRefused(t, err)
	_, err = connect(t, urlEnv(s), "FAIRWAY_NATS_NKEY="+writeFile(t, "other.nk", otherSeed))
	requireAuthRefused(t, err)
}

// TestCredsFile runs the server in operator (JWT) mode, as nsc sets it up:
// an operator signs an account, the account signs a user, and the user's
// .creds file (JWT and seed) is all the client gets.
func TestCredsFile(t *testing.T) {
	t.Parallel()
	operator, err := nkeys.CreateOperator()
	require.NoError(t, err)
	opub, err := operator.PublicKey()
	require.NoError(t, err)
	resolver := &server.MemAccResolver{}
	account := newAccount(t, operator, resolver)
	stranger, err := nkeys.CreateAccount() // an account the operator never signed
	require.NoError(t, err)
	s := startServer(t, &server.Options{TrustedKeys: []string{opub}, AccountResolver: resolver})

	_, err = connect(t, urlEnv(s), "FAIRWAY_NATS_CREDS="+userCreds(t, account))
	require.NoError(t, err)

	_, err = connect(t, urlEnv(s))
	require.Error(t, err)
	_, err = connect(t, urlEnv(s), "FAIRWAY_NATS_CREDS="+userCreds(t, stranger))
	requireAuthRefused(t, err)
}

// newAccount creates an account signed by operator and stores its JWT in
// the server's resolver.
func newAccount(t *testing.T, operator nkeys.KeyPair, resolver *server.MemAccResolver) nkeys.KeyPair {
	t.Helper()
	account, err := nkeys.CreateAccount()
	require.NoError(t, err)
	apub, err := account.PublicKey()
	require.NoError(t, err)
	ajwt, err := jwt.NewAccountClaims(apub).Encode(operator)
	require.NoError(t, err)
	require.NoError(t, resolver.Store(apub, ajwt))
	return account
}

// userCreds writes a .creds file for a new user signed by account.
func userCreds(t *testing.T, account nkeys.KeyPair) string {
	t.Helper()
	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	upub, err := user.PublicKey()
	require.NoError(t, err)
	ujwt, err := jwt.NewUserClaims(upub).Encode(account)
	require.NoError(t, err)
	seed, err := user.Seed()
	require.NoError(t, err)
	creds, err := jwt.FormatUserConfig(ujwt, seed)
	require.NoError(t, err)
	return writeFile(t, "user.creds", creds)
}

func TestTLSWithCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	other := testcerts.NewCA(t, dir, "other-ca")
	srv := ca.Server(t, "server")
	s := startServer(t, &server.Options{TLSConfig: &tls.Config{Certificates: []tls.Certificate{srv.TLS}, MinVersion: tls.VersionTLS12}})

	nc, err := connect(t, urlEnv(s), "FAIRWAY_NATS_TLS_CA="+ca.CertFile)
	require.NoError(t, err)
	state, err := nc.TLSConnectionState()
	require.NoError(t, err)
	require.True(t, state.HandshakeComplete)

	_, err = connect(t, urlEnv(s)) // the server's CA is not a system root
	require.Error(t, err)
	_, err = connect(t, urlEnv(s), "FAIRWAY_NATS_TLS_CA="+other.CertFile)
	require.Error(t, err)
	require.Contains(t, err.Error(), "certificate signed by unknown authority")
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, dir, "ca")
	other := testcerts.NewCA(t, dir, "other-ca")
	srv := ca.Server(t, "server")
	client := ca.Client(t, "client")
	stranger := other.Client(t, "stranger")
	s := startServer(t, &server.Options{
		TLSVerify: true,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{srv.TLS},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    ca.Pool(),
			MinVersion:   tls.VersionTLS12,
		},
	})

	nc, err := connect(t, urlEnv(s), "FAIRWAY_NATS_TLS_CA="+ca.CertFile,
		"FAIRWAY_NATS_TLS_CERT="+client.CertFile, "FAIRWAY_NATS_TLS_KEY="+client.KeyFile)
	require.NoError(t, err)
	state, err := nc.TLSConnectionState()
	require.NoError(t, err)
	require.True(t, state.HandshakeComplete)

	_, err = connect(t, urlEnv(s), "FAIRWAY_NATS_TLS_CA="+ca.CertFile) // no client certificate
	require.Error(t, err)
	_, err = connect(t, urlEnv(s), "FAIRWAY_NATS_TLS_CA="+ca.CertFile,
		"FAIRWAY_NATS_TLS_CERT="+stranger.CertFile, "FAIRWAY_NATS_TLS_KEY="+stranger.KeyFile)
	require.Error(t, err)
}

// TestConnectErrorMasksSecrets makes a real attempt to a port nothing
// listens on, with a password and with a token in the URL.
func TestConnectErrorMasksSecrets(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	for url, want := range map[string]string{
		"nats://fair:pw-s3cret@" + addr:                           "nats://fair:****@" + addr,
		"nats://tok-s3cret@" + addr:                               "nats://****@" + addr,
		"nats://a:pw-s3cret@" + addr + ",nats://b:s3cret@" + addr: "nats://a:****@" + addr + ",nats://b:****@" + addr,
	} {
		_, err := connect(t, "FAIRWAY_NATS_URL="+url)
		require.Error(t, err)
		require.ErrorIs(t, err, nats.ErrNoServers)
		require.NotContains(t, err.Error(), "s3cret")
		require.Contains(t, err.Error(), "connecting to NATS at "+want)
	}
}
