package cli

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckDevListen(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:4222", "127.0.0.2:4222", "[::1]:4222", "localhost:4222", "127.0.0.1:0"} {
		require.NoError(t, checkDevListen(addr, false), addr)
	}
	for _, addr := range []string{"0.0.0.0:4222", ":4222", "[::]:4222", "192.0.2.1:4222", "[2001:db8::1]:4222", "no-such-host.invalid:4222"} {
		err := checkDevListen(addr, false)
		require.Error(t, err, addr)
		require.Contains(t, err.Error(), "dev.nats-addr "+addr+" is not a loopback address: fairway dev's NATS has no authentication unless --tenants is given; listen on 127.0.0.1 or pass --tenants")
		require.NoError(t, checkDevListen(addr, true), "%s with authentication", addr)
	}
	require.ErrorContains(t, checkDevListen("localhost", false), "dev.nats-addr localhost")
}

// TestDevRefusesToListenOnEveryInterface: fairway dev stops before it
// starts anything.
func TestDevRefusesToListenOnEveryInterface(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), nil, []string{"dev", "--dev-dir", t.TempDir(), "--nats-addr", "0.0.0.0:4222"}, &out, &errOut)
	require.Equal(t, 1, code)
	require.Contains(t, errOut.String(), "dev.nats-addr 0.0.0.0:4222 is not a loopback address")
	require.NotContains(t, errOut.String(), "NATS ready")
}
