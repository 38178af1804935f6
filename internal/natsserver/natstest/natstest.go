// Package natstest starts a real embedded NATS server with JetStream for
// tests: each test gets its own, on a random port, with its storage in the
// test's temporary directory.
package natstest

import (
	"testing"

	"github.com/fairwayhq/fairway/internal/natsserver"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Start starts a NATS server for t and connects to it in process. Both are
// closed when t ends.
func Start(t testing.TB) (*server.Server, *nats.Conn) {
	t.Helper()
	s, err := natsserver.Start(natsserver.Options{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatalf("natstest: starting NATS: %v", err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	nc, err := natsserver.Connect(s, t.Name())
	if err != nil {
		t.Fatalf("natstest: connecting to NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}
