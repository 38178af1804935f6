package natsserver_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/natsserver"
	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
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

func TestStartJetStreamInProcess(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	s, err := natsserver.Start(natsserver.Options{
		StoreDir: t.TempDir(),
		Port:     -1,
		Logger:   slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	// The server's notices (its start-up banner) are debug lines: Fairway
	// logs its own one-line summary. Its warnings and errors keep their level.
	require.Contains(t, logs.String(), `level=DEBUG msg="Server is ready"`)
	require.NotContains(t, logs.String(), "level=INFO")

	nc, err := natsserver.Connect(s, "test")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.EqualValues(t, natsserver.MaxPayloadDefault, nc.MaxPayload())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	require.NoError(t, err)
	ack, err := js.Publish(ctx, "t.x", []byte("hello"))
	require.NoError(t, err)
	require.Equal(t, "T", ack.Stream)

	// The TCP listener works too.
	tcp, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	defer tcp.Close()
	require.NoError(t, tcp.Flush())
}

func TestStartPortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }() // only holds the port
	port := ln.Addr().(*net.TCPAddr).Port

	_, err = natsserver.Start(natsserver.Options{StoreDir: t.TempDir(), Host: "127.0.0.1", Port: port})
	require.Error(t, err)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	require.EqualError(t, err, addr+" is in use: is another fairway dev running? pass --nats-url to use it")
	require.True(t, errors.Is(err, syscall.EADDRINUSE))
	var inUse *natsserver.AddrInUseError
	require.ErrorAs(t, err, &inUse)
	require.Equal(t, addr, inUse.Addr)
}

func TestStartNeedsStoreDir(t *testing.T) {
	t.Parallel()
	_, err := natsserver.Start(natsserver.Options{Port: -1})
	require.ErrorContains(t, err, "StoreDir")
}

func TestNatstest(t *testing.T) {
	t.Parallel()
	s, nc := natstest.Start(t)
	require.True(t, s.JetStreamEnabled())
	sub, err := nc.SubscribeSync("ping")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("ping", []byte("x")))
	msg, err := sub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "x", string(msg.Data))
}
