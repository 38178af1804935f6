package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// Netns is a network namespace the suite made, for a network partition:
// a process runs inside it (`ip netns exec`) and reaches NATS and
// PostgreSQL through a bridge, a listener inside the namespace on the
// same 127.0.0.1 port as the server outside, whose connections the suite
// forwards to that server. Every address is a loopback address; no
// traffic leaves the machine, nor even its loopback interfaces.
//
// Cut takes the namespace's loopback interface down: packets between the
// process and the bridge are dropped by the kernel (new connections are
// refused as unreachable, established ones go silent, as through a
// partitioned link), while the bridge's connections to the servers stay
// open. Heal brings it up again and the established connections resume.
type Netns struct {
	Name string

	mu      sync.Mutex
	bridged map[int]net.Listener
}

// NewNetns makes a network namespace with its loopback interface up. It
// fails with a clear message when namespaces cannot be made (not root,
// no `ip`): the partition scenarios need them.
func NewNetns(ctx context.Context, name string) (*Netns, error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("network partition needs `ip` (Debian package iproute2: apt-get install -y iproute2): %w", err)
	}
	_ = exec.CommandContext(ctx, "ip", "netns", "del", name).Run() // left over from a killed run
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("network partition needs a network namespace (run as root): ip netns add %s: %w: %s", name, err, out)
	}
	n := &Netns{Name: name, bridged: map[int]net.Listener{}}
	if err := n.ip(ctx, "link", "set", "lo", "up"); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Netns) ip(ctx context.Context, args ...string) error {
	args = append([]string{"netns", "exec", n.Name, "ip"}, args...)
	if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Cut partitions the processes inside the namespace from everything.
func (n *Netns) Cut(ctx context.Context) error { return n.ip(ctx, "link", "set", "lo", "down") }

// Heal ends the partition.
func (n *Netns) Heal(ctx context.Context) error { return n.ip(ctx, "link", "set", "lo", "up") }

// Bridge makes 127.0.0.1:port inside the namespace lead to 127.0.0.1:port
// outside.
func (n *Netns) Bridge(port int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.bridged[port] != nil {
		return nil
	}
	ln, err := n.listen(fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	n.bridged[port] = ln
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go forward(in, port)
		}
	}()
	return nil
}

func forward(in net.Conn, port int) {
	defer func() { _ = in.Close() }() // a proxied connection: its ends see what they see
	out, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return
	}
	defer func() { _ = out.Close() }()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}

// Close stops the bridges and deletes the namespace.
func (n *Netns) Close() {
	n.mu.Lock()
	for _, ln := range n.bridged {
		_ = ln.Close() // the namespace is deleted next: nothing is left to retry
	}
	n.bridged = map[int]net.Listener{}
	n.mu.Unlock()
	_ = exec.Command("ip", "netns", "del", n.Name).Run()
}

// urlPorts returns the ports of a PostgreSQL URL (several for a
// multi-host URL).
func urlPorts(dbURL string) ([]int, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, err
	}
	var ports []int
	for _, h := range strings.Split(u.Host, ",") {
		_, p, err := net.SplitHostPort(h)
		if err != nil {
			return nil, fmt.Errorf("database URL host %q: %w", h, err)
		}
		port, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		ports = append(ports, port)
	}
	return ports, nil
}
