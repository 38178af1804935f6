package pgtest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Freezer stands between a test and a PostgreSQL server as a primary whose
// processes are frozen (SIGSTOP, a stalled disk, a VM paused) while its
// host still answers TCP: frozen, it accepts connections and takes their
// bytes (the kernel's buffers do), but nothing comes back, nor does a
// connection's set-up go on; thawed, every byte held is passed on. TCP
// keep-alives do not find such a server: the host answers them.
type Freezer struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	thawed chan struct{} // closed while thawed
}

// NewFreezer listens on a port of the loopback interface and passes each
// connection on to the server of rawURL; through is rawURL by way of it. It
// closes when t ends.
func NewFreezer(t testing.TB, rawURL string) (f *Freezer, through string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	f = &Freezer{ln: ln, target: u.Host, thawed: make(chan struct{})}
	close(f.thawed)
	var conns sync.WaitGroup
	stop := make(chan struct{})
	go f.serve(&conns, stop)
	t.Cleanup(func() {
		f.Thaw()
		close(stop)
		_ = ln.Close()
		conns.Wait()
	})
	u.Host = ln.Addr().String()
	return f, u.String()
}

// Freeze holds every byte from now on, both ways, and every new
// connection's set-up, until Thaw.
func (f *Freezer) Freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
		f.thawed = make(chan struct{})
	default:
	}
}

// Thaw passes on what was held, and lets the bytes flow again.
func (f *Freezer) Thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
	default:
		close(f.thawed)
	}
}

// wait returns once the server is thawed, or stop closes (false).
func (f *Freezer) wait(stop <-chan struct{}) bool {
	f.mu.Lock()
	thawed := f.thawed
	f.mu.Unlock()
	select {
	case <-thawed:
		return true
	case <-stop:
		return false
	}
}

func (f *Freezer) serve(conns *sync.WaitGroup, stop chan struct{}) {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		conns.Go(func() { f.pass(c, stop) })
	}
}

// pass connects c to the server once thawed and copies both ways, each
// write waiting while frozen.
func (f *Freezer) pass(c net.Conn, stop chan struct{}) {
	defer func() { _ = c.Close() }()
	if !f.wait(stop) {
		return
	}
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	done := make(chan struct{}, 2)
	go func() { f.copy(up, c, stop); done <- struct{}{} }()
	go func() { f.copy(c, up, stop); done <- struct{}{} }()
	select {
	case <-done: // one side closed: close both, which ends the other
	case <-stop:
	}
	_ = c.Close()
	_ = up.Close()
	<-done
}

func (f *Freezer) copy(dst io.Writer, src io.Reader, stop chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !f.wait(stop) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
