package cli_test

import (
	"net"
	"strings"
	"testing"

	"github.com/fairwayhq/fairway/coordinator"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/fairwayhq/fairway/store"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// connFlags are the flags of the nats.* connection keys.
var connFlags = []string{"--nats-url", "--creds", "--nkey", "--user", "--password", "--token", "--tls-ca", "--tls-cert", "--tls-key"}

// TestEveryConnectingCommandTakesCredentials: every command that connects
// to NATS accepts the credential and TLS flags.
func TestEveryConnectingCommandTakesCredentials(t *testing.T) {
	for _, args := range [][]string{
		{"dev"}, {"coordinator"}, {"executor"}, {"bench"},
		{"submit"}, {"jobs", "list"}, {"jobs", "show"}, {"jobs", "cancel"}, {"events", "tail"},
		{"executors", "list"}, {"periodic", "add"}, {"periodic", "list"}, {"periodic", "run-now"}, {"dead-letters", "list"},
	} {
		code, out, errOut := run(t, append(args, "--help")...)
		require.Equal(t, 0, code, errOut)
		for _, flag := range connFlags {
			require.Contains(t, out, flag+" ", "fairway %s has no %s", strings.Join(args, " "), flag)
		}
	}
}

// TestClientCommandAuthenticates runs a client command against a real NATS
// server that requires a user and password, with a coordinator behind it.
func TestClientCommandAuthenticates(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: t.TempDir(), Username: "fair", Password: "pw-s3cret"})
	require.NoError(t, err)
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	require.True(t, s.ReadyForConnections(waitTimeout))
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("fair", "pw-s3cret"))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	coord, err := coordinator.New(storetest.Public(storetest.Open(t)), nc, coordinator.Config{})
	require.NoError(t, err)
	require.NoError(t, coord.Start(t.Context()))
	t.Cleanup(coord.Stop)

	code, _, errOut := run(t, "jobs", "list", "--nats-url", s.ClientURL())
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "Authorization Violation")

	code, _, errOut = run(t, "jobs", "list", "--nats-url", s.ClientURL(), "--user", "fair", "--password", "wrong-s3cret")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "Authorization Violation")
	require.NotContains(t, errOut, "s3cret")

	t.Setenv("FAIRWAY_NATS_PASSWORD", "pw-s3cret")
	code, out, errOut := run(t, "jobs", "list", "--nats-url", s.ClientURL(), "--user", "fair")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out+errOut, "s3cret")
}

// TestConfigPrintMasksEveryForm: no secret reaches config print, in any
// form, from the environment or a flag.
func TestConfigPrintMasksEveryForm(t *testing.T) {
	for _, env := range [][]string{
		{"FAIRWAY_NATS_URL=nats://fair:pw-s3cret@h:4222"},
		{"FAIRWAY_NATS_URL=nats://tok-s3cret@h1:4222,nats://fair:pw-s3cret@h2:4222"},
		{"FAIRWAY_NATS_USER=fair", "FAIRWAY_NATS_PASSWORD=pw-s3cret"},
		{"FAIRWAY_NATS_TOKEN=tok-s3cret"},
		{"FAIRWAY_DATABASE_URL=postgres://fair:pw-s3cret@db:5432/fairway?sslmode=verify-full&sslrootcert=/etc/ca.pem"},
		{"FAIRWAY_DATABASE_URL=host=db user=fair password=pw-s3cret dbname=fairway"},
		{"FAIRWAY_DATABASE_URL=host=db user=fair password='pw s3cret' dbname=fairway"},
		{"FAIRWAY_DATABASE_URL=host=db password = pw-s3cret dbname=fairway"},
	} {
		t.Run(env[0], func(t *testing.T) { // t.Setenv is undone when the subtest ends
			for _, kv := range env {
				name, value, _ := strings.Cut(kv, "=")
				t.Setenv(name, value)
			}
			code, out, errOut := run(t, "config", "print")
			require.Equal(t, 0, code, errOut)
			require.NotContains(t, out, "s3cret")
			require.Contains(t, out, "****")
		})
	}
}

// TestConnectionErrorsMaskSecrets makes real connection attempts to a port
// nothing listens on, and hands PostgreSQL a connection string it cannot
// parse: the errors name where, never the password.
func TestConnectionErrorsMaskSecrets(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	for _, args := range [][]string{
		{"jobs", "list", "--nats-url", "nats://fair:pw-s3cret@" + addr},
		{"jobs", "list", "--nats-url", "nats://tok-s3cret@" + addr},
		{"jobs", "list", "--nats-url", "nats://a:pw-s3cret@" + addr + ",nats://b:pw-s3cret@" + addr},
		{"migrate", "--database-url", "postgres://fair:pw-s3cret@" + addr + "/fairway?sslmode=disable"},
		{"migrate", "--database-url", "host=" + host + " port=" + port + " user=fair password='pw s3cret' sslmode=disable"},
		{"migrate", "--database-url", "host=" + host + " port=not-a-port password = pw-s3cret"},
		{"migrate", "--database-url", "postgres://fair:pw-s3cret@" + host + ":not-a-port/fairway"},
	} {
		code, _, errOut := run(t, args...)
		require.Equal(t, 1, code, args)
		require.NotContains(t, errOut, "s3cret", args)
		require.Contains(t, errOut, "fairway: ", args)
	}

	// store.Open's own error, which other programs may log, holds no
	// secret either (pgconn leaves "password = x" with spaces unmasked).
	_, err := store.Open(t.Context(), "host="+host+" port=not-a-port password = pw-s3cret", store.Options{})
	require.ErrorContains(t, err, "invalid port")
	require.NotContains(t, err.Error(), "s3cret")
}

// closedAddr returns a loopback host:port nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
