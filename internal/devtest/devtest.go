// Package devtest helps tests that run Fairway's processes (fairway dev, a
// coordinator, nats-server): free ports, a directory PostgreSQL can reach,
// and output that a test waits on.
package devtest

import (
	"bytes"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now
// (Port), or fails t.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := Port()
	if err != nil {
		t.Fatalf("devtest: finding a free port: %v", err)
	}
	return port
}

// Port returns a TCP port on 127.0.0.1 that nothing listens on now and
// that this process has not handed out before: the kernel may hand a
// port just closed out again at once, and a test that asks for two (NATS's
// and the dashboard's, two executors') would get it twice, and one of
// its servers would not start ("address already in use").
func Port() (int, error) {
	given.Lock()
	defer given.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close() // only listened on to learn a free port
		if !given.ports[port] {
			given.ports[port] = true
			return port, nil
		}
	}
}

// given are the ports Port returned in this process.
var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Dir returns a new directory, removed when t ends, that the postgres user
// can reach: as root, fairway dev and the test clusters run PostgreSQL as
// that unprivileged user, and t.TempDir's parent is 0700.
func Dir(t testing.TB, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatalf("devtest: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("devtest: removing %s: %v", dir, err)
		}
	})
	return dir
}

// Output collects a process's output (it is an io.Writer, safe for
// concurrent use); tests wait on what it contains.
type Output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	watches map[string]chan struct{}
}

// Seen returns a channel closed once the output contains want.
func (o *Output) Seen(want string) <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.watches == nil {
		o.watches = map[string]chan struct{}{}
	}
	ch, ok := o.watches[want]
	if !ok {
		ch = make(chan struct{})
		o.watches[want] = ch
		o.notify()
	}
	return ch
}

// Wait waits until the output contains want, at most timeout.
func (o *Output) Wait(t testing.TB, want string, timeout time.Duration) {
	t.Helper()
	select {
	case <-o.Seen(want):
	case <-time.After(timeout):
		t.Fatalf("no %q in the output within %s:\n%s", want, timeout, o)
	}
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	o.notify()
	return len(p), nil
}

// notify closes the watches of the strings the output contains.
func (o *Output) notify() {
	for want, ch := range o.watches {
		if bytes.Contains(o.buf.Bytes(), []byte(want)) {
			close(ch)
			delete(o.watches, want)
		}
	}
}

// String returns the output so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
