// Package natstest starts a real embedded NATS server with JetStream for
// tests: each test gets its own, on a random port, with its storage in the
// test's temporary directory.
package natstest

import (
	"time"

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

// StartWithStore starts a bare JetStream server whose file storage holds
// at most maxStore bytes (JetStream reserves each stream's byte limit from
// it), and connects to it. Both are closed when t ends.
func StartWithStore(t testing.TB, maxStore int64) *nats.Conn {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), JetStreamMaxStore: maxStore, NoSigs: true})
	if err != nil {
		t.Fatalf("natstest: starting NATS: %v", err)
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("natstest: NATS not ready within 10 s")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("natstest: connecting to NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}
