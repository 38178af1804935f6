// Package httpedge bounds what the clients of an HTTP server can hold: the
// connections of each client address and of all of them, and how slowly a
// request may arrive.
//
// A slow client (slowloris) opens many connections and sends each
// request a byte at a time: a server that only caps its connections in
// total, and gives each request's headers a total timeout, lets one client
// take every connection and hold it for that timeout, and everyone else
// waits. Wrap bounds a server so that
//
//   - each client address (an IPv4 address, or an IPv6 /64) holds at most
//     Limits.PerAddr connections at once; one more is answered 503 and
//     closed at once, never queued;
//   - all clients together hold at most Limits.Total; one more waits in the
//     kernel's backlog until one closes (so the process keeps its file
//     descriptors), which one address alone cannot cause (PerAddr is
//     under Total: 32 of 512 by default);
//   - a request's headers make progress: their first byte within
//     Limits.HeaderGrace of the connection's start (or of the first byte
//     after an idle keep-alive), and then the deadline moves forward by a
//     second for each Limits.MinRate bytes received, never beyond the
//     server's ReadHeaderTimeout (as Apache's mod_reqtimeout, header=5,
//     MinRate=512);
//   - a request's body likewise: its first byte within Limits.BodyGrace of
//     the handler's first read, then Limits.MinRate bytes a second, never
//     beyond the server's ReadTimeout.
//
// A response is not timed: a handler that streams (Server-Sent Events)
// writes for as long as it likes, and the server's read of the idle
// connection meanwhile (to notice the client leave) has no deadline.
package httpedge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Defaults of Limits.
const (
	DefaultTotal       = 512
	DefaultPerAddr     = 32
	DefaultHeaderGrace = 5 * time.Second
	DefaultBodyGrace   = 5 * time.Second
	DefaultMinRate     = 512 // bytes a second
)

// Limits bounds a server's clients; a field left zero takes its default.
type Limits struct {
	// Total caps the connections open at once; one more waits until one
	// closes. Default DefaultTotal.
	Total int
	// PerAddr caps the connections open at once from one client address
	// (an IPv4 address, an IPv6 /64; addresses that are not IP share one
	// bound); one more is answered 503 and closed. Default DefaultPerAddr,
	// and never more than Total.
	PerAddr int
	// HeaderGrace is how long a request's headers may take to send their
	// first byte; BodyGrace likewise for its body. Defaults
	// DefaultHeaderGrace and DefaultBodyGrace.
	HeaderGrace, BodyGrace time.Duration
	// MinRate is the rate, in bytes a second, at which headers and bodies
	// must arrive after their grace. Default DefaultMinRate.
	MinRate int
	// Logger, if set, says when connections are refused or requests cut
	// for their slowness: at most a line every 10 s, with the counts since
	// the line before.
	Logger *slog.Logger
}

// WithDefaults is l with each zero field its default.
func (l Limits) WithDefaults() Limits {
	if l.Total <= 0 {
		l.Total = DefaultTotal
	}
	if l.PerAddr <= 0 {
		l.PerAddr = DefaultPerAddr
	}
	l.PerAddr = min(l.PerAddr, l.Total)
	if l.HeaderGrace <= 0 {
		l.HeaderGrace = DefaultHeaderGrace
	}
	if l.BodyGrace <= 0 {
		l.BodyGrace = DefaultBodyGrace
	}
	if l.MinRate <= 0 {
		l.MinRate = DefaultMinRate
	}
	return l
}

// Wrap bounds srv's clients by l: it returns ln bounded, for srv.Serve,
// and sets srv's ConnState, ConnContext and Handler to follow each
// connection's requests (calling the ones set before). Call it once per
// server, before Serve. The server's own timeouts stay: ReadHeaderTimeout
// and ReadTimeout bound a request however fast it arrives, IdleTimeout an
// idle keep-alive connection. The server serves HTTP/1 only (Wrap sets
// srv.Protocols so): HTTP/2 multiplexes requests on a connection, whose
// reads this package could not time by request.
func Wrap(srv *http.Server, ln net.Listener, l Limits) net.Listener {
	l = l.WithDefaults()
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	bl := &listener{Listener: ln, limits: l, slots: make(chan struct{}, l.Total), lingering: make(chan struct{}, lingerMax), done: make(chan struct{}),
		open: map[netip.Prefix]int{}, report: &reporter{log: l.Logger}}
	state, connCtx, h := srv.ConnState, srv.ConnContext, srv.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	srv.ConnState = func(nc net.Conn, s http.ConnState) {
		if c := edgeConn(nc); c != nil {
			c.state(s)
		}
		if state != nil {
			state(nc, s)
		}
	}
	srv.ConnContext = func(ctx context.Context, nc net.Conn) context.Context {
		if connCtx != nil {
			ctx = connCtx(ctx, nc)
		}
		if c := edgeConn(nc); c != nil {
			ctx = context.WithValue(ctx, connKey{}, c)
		}
		return ctx
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*conn); ok && r.Body != nil && r.Body != http.NoBody {
			r.Body = &body{ReadCloser: r.Body, c: c, until: c.requestDeadline()}
		}
		h.ServeHTTP(w, r)
	})
	return bl
}

type connKey struct{}

// edgeConn is the connection of this package under nc (a TLS connection
// wraps it), or nil.
func edgeConn(nc net.Conn) *conn {
	for range 4 {
		switch c := nc.(type) {
		case *conn:
			return c
		case interface{ NetConn() net.Conn }:
			nc = c.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// ClientKey is the client address whose connections are bounded together:
// an IPv4 address (IPv4-mapped IPv6 ones as IPv4), the /64 of an IPv6 one
// (one host or site usually has a whole /64), or the zero prefix for an
// address that is not IP.
func ClientKey(a net.Addr) netip.Prefix {
	var ap netip.AddrPort
	if t, ok := a.(*net.TCPAddr); ok {
		ap = t.AddrPort()
	} else if a != nil {
		ap, _ = netip.ParseAddrPort(a.String())
	}
	ip := ap.Addr().Unmap().WithZone("")
	switch {
	case ip.Is4():
		return netip.PrefixFrom(ip, 32)
	case ip.Is6():
		p, _ := ip.Prefix(64)
		return p
	}
	return netip.Prefix{}
}

// listener bounds the connections it accepts: in total (slots) and per
// client address (open).
type listener struct {
	net.Listener
	limits    Limits
	slots     chan struct{} // a token per connection open
	lingering chan struct{} // a token per refused connection lingering
	done      chan struct{} // closed by Close
	once      sync.Once
	report    *reporter

	mu   sync.Mutex
	open map[netip.Prefix]int
}

// Accept waits for a free slot, then accepts the next connection whose
// address is under its bound; those over it are answered 503 and closed.
func (ln *listener) Accept() (net.Conn, error) {
	for {
		select {
		case ln.slots <- struct{}{}:
		case <-ln.done:
			return nil, net.ErrClosed
		}
		nc, err := ln.Listener.Accept()
		if err != nil {
			<-ln.slots
			return nil, err
		}
		key := ClientKey(nc.RemoteAddr())
		if ln.take(key) {
			return &conn{Conn: nc, ln: ln, key: key, mode: modeHeaders, start: time.Now()}, nil
		}
		<-ln.slots
		ln.refuse(nc, key)
	}
}

// take counts a connection of key, unless key has its bound open.
func (ln *listener) take(key netip.Prefix) bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.open[key] >= ln.limits.PerAddr {
		return false
	}
	ln.open[key]++
	return true
}

func (ln *listener) release(key netip.Prefix) {
	ln.mu.Lock()
	if ln.open[key]--; ln.open[key] <= 0 {
		delete(ln.open, key)
	}
	ln.mu.Unlock()
	<-ln.slots
}

// refuse answers a connection over its address's bound 503, without
// reading its request, and closes it. The answer fits any socket's send
// buffer: the write does not wait. To deliver it (a connection closed with
// a request unread is reset, and the reset can discard the answer), the
// connection is half-closed and its request read and dropped for up to a
// second before it is closed; at most lingerMax at once, beyond which a
// connection is closed at once.
func (ln *listener) refuse(nc net.Conn, key netip.Prefix) {
	ln.report.note(true, key)
	msg := fmt.Sprintf("too many connections from your address: at most %d at once\n", ln.limits.PerAddr)
	_ = nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := fmt.Fprintf(nc, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 5\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
	hc, ok := nc.(interface{ CloseWrite() error })
	if err != nil || !ok {
		_ = nc.Close()
		return
	}
	select {
	case ln.lingering <- struct{}{}:
	default:
		_ = nc.Close()
		return
	}
	go func() {
		defer func() { <-ln.lingering }()
		_ = hc.CloseWrite()
		_ = nc.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
		_ = nc.Close()
	}()
}

// lingerMax bounds the refused connections that linger to deliver their
// answer (listener.refuse).
const lingerMax = 64

// Close stops Accept, including one waiting for a slot.
func (ln *listener) Close() error {
	ln.once.Do(func() { close(ln.done) })
	return ln.Listener.Close()
}

// The modes of a connection, as its server reads it: a request's headers
// (from the connection's start, or from the first byte after idle), a
// request being handled (the body is timed by body, if it is read), or
// idle between requests (the server's IdleTimeout).
const (
	modeHeaders = iota
	modeRequest
	modeIdle
)

// conn is a connection of listener: it takes a slot and a place of its
// address until closed, and times the headers of its requests.
type conn struct {
	net.Conn
	ln     *listener
	key    netip.Prefix
	closed sync.Once

	mu        sync.Mutex
	mode      int
	start     time.Time // the headers' start
	got       int64     // the headers' bytes so far
	serverDL  time.Time // the read deadline the server last set
	requestDL time.Time // the server's deadline of the request being handled (its ReadTimeout)
}

func (c *conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	timed := c.mode == modeHeaders
	var dl time.Time
	if timed {
		dl = progressDeadline(c.start, c.ln.limits.HeaderGrace, c.got, c.ln.limits.MinRate, c.serverDL)
		_ = c.Conn.SetReadDeadline(dl)
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	if n > 0 {
		switch c.mode {
		case modeHeaders:
			c.got += int64(n)
		case modeIdle: // the next request's first bytes
			c.mode, c.start, c.got = modeHeaders, time.Now(), int64(n)
		}
	}
	cut := timed && isTimeout(err) && (c.serverDL.IsZero() || dl.Before(c.serverDL))
	c.mu.Unlock()
	if cut {
		c.ln.report.note(false, c.key)
	}
	return n, err
}

// SetReadDeadline is the server's deadline; while headers are read, the
// one of their progress if it is sooner.
func (c *conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.serverDL = t
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.serverDL = t
	return c.Conn.SetDeadline(t)
}

// state follows the server's requests on c (http.Server.ConnState): a
// request's headers are read when it is active, and the connection waits
// for the next one when it is idle.
func (c *conn) state(s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s {
	case http.StateActive:
		c.mode, c.requestDL = modeRequest, c.serverDL
	case http.StateIdle:
		c.mode = modeIdle
	}
}

func (c *conn) requestDeadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requestDL
}

// setBodyDeadline sets the read deadline of a body's next read (the server
// sets its own when the body is read through, before its read of the idle
// connection).
func (c *conn) setBodyDeadline(t time.Time) { _ = c.Conn.SetReadDeadline(t) }

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.closed.Do(func() { c.ln.release(c.key) })
	return err
}

// body is a request's body, read at least at Limits.MinRate after
// Limits.BodyGrace, and by until (the server's ReadTimeout) at the latest.
type body struct {
	io.ReadCloser
	c     *conn
	until time.Time
	start time.Time
	got   int64
	done  bool // read to its end, or failed: the server reads the connection now
}

func (b *body) Read(p []byte) (int, error) {
	if !b.done {
		if b.start.IsZero() {
			b.start = time.Now()
		}
		b.c.setBodyDeadline(progressDeadline(b.start, b.c.ln.limits.BodyGrace, b.got, b.c.ln.limits.MinRate, b.until))
	}
	n, err := b.ReadCloser.Read(p)
	b.got += int64(n)
	if err != nil && !b.done {
		b.done = true
		if isTimeout(err) && (b.until.IsZero() || time.Now().Before(b.until)) {
			b.c.ln.report.note(false, b.c.key)
		}
	}
	return n, err
}

// progressDeadline is when data that began at start, got bytes ago, must
// have sent more: grace after start, plus a second for each rate bytes
// received; at the latest limit (unless zero).
func progressDeadline(start time.Time, grace time.Duration, got int64, rate int, limit time.Time) time.Time {
	dl := start.Add(grace + time.Duration(float64(got)/float64(rate)*float64(time.Second)))
	if !limit.IsZero() && limit.Before(dl) {
		return limit
	}
	return dl
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// reporter logs refusals and cuts, at most a line every 10 s.
type reporter struct {
	log          *slog.Logger
	mu           sync.Mutex
	next         time.Time
	refused, cut int
}

func (r *reporter) note(refused bool, key netip.Prefix) {
	if r.log == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if refused {
		r.refused++
	} else {
		r.cut++
	}
	now := time.Now()
	if now.Before(r.next) {
		return
	}
	client := "not IP"
	if key.IsValid() {
		client = key.String()
	}
	r.log.Warn("http: slow or too many connections from a client", "refused_over_address_bound", r.refused,
		"cut_too_slow", r.cut, "last_client", client)
	r.refused, r.cut, r.next = 0, 0, now.Add(10*time.Second)
}
