package chaos

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// listen opens a listener inside the namespace: a socket belongs to the
// namespace of the thread that made it, so a locked thread enters the
// namespace, listens, and is then discarded (its goroutine ends locked).
func (n *Netns) listen(addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		f, err := os.Open("/var/run/netns/" + n.Name)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer func() { _ = f.Close() }() // opened to read its fd
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %w", n.Name, err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- result{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}
