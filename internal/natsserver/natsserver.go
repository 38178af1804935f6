// Package natsserver runs the NATS server that Fairway embeds in one process
// (fairway dev, and tests): nats-server as a library, with JetStream on.
//
// A production cluster uses its own NATS servers; Fairway then only needs
// their URL.
package natsserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fairwayhq/fairway/internal/natsauth"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Defaults of Options.
const (
	// HostDefault is the interface the client listener binds to: loopback,
	// so a development server is not reachable from other machines.
	HostDefault = "127.0.0.1"
	// PortDefault is the standard NATS client port.
	PortDefault = server.DEFAULT_PORT
	// MaxPayloadDefault is the largest message the server accepts (8 MiB):
	// room for a submission with 1 MiB of args and for large results.
	MaxPayloadDefault = 8 << 20
	// ReadyTimeout bounds how long Start waits for the server to accept
	// connections.
	ReadyTimeout = 10 * time.Second
)

// Options configures an embedded NATS server with JetStream.
type Options struct {
	// StoreDir is the directory JetStream stores streams in. Required.
	StoreDir string
	// Host is the address the client listener binds to. Defaults to
	// 127.0.0.1.
	Host string
	// Port is the client port; -1 picks a free port (tests). Defaults to
	// 4222.
	Port int
	// MaxPayload caps one message. Defaults to 8 MiB.
	MaxPayload int32
	// Accounts, when set, runs the server in operator (JWT) mode with
	// Fairway's accounts (see package natsauth): every connection needs a
	// credential, and each tenant and executor is an account of its own.
	// The account JWTs are kept in ResolverDir, where fairway creds pushes
	// new ones while the server runs. Defaults to none: no authentication.
	Accounts *natsauth.Keyring
	// ResolverDir is the account JWT directory of operator mode. Required
	// with Accounts.
	ResolverDir string
	// Logger receives the server's notices (at debug level), warnings and errors (debug and
	// trace output stay off). Defaults to none: the server is quiet.
	Logger *slog.Logger
}

// AddrInUseError is returned by Start when the client port is taken. It
// matches errors.Is(err, syscall.EADDRINUSE).
type AddrInUseError struct {
	Addr string // host:port
}

func (e *AddrInUseError) Error() string {
	return e.Addr + " is in use: is another fairway dev running? pass --nats-url to use it"
}

// Unwrap returns syscall.EADDRINUSE.
func (e *AddrInUseError) Unwrap() error { return syscall.EADDRINUSE }

// Start starts a NATS server with JetStream and returns once it accepts
// connections. The caller shuts it down with Shutdown and, to wait for
// JetStream to close its files, WaitForShutdown.
func Start(opts Options) (*server.Server, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("natsserver: StoreDir is required: JetStream needs a directory to store streams in")
	}
	host := opts.Host
	if host == "" {
		host = HostDefault
	}
	port := opts.Port
	if port == 0 {
		port = PortDefault
	}
	maxPayload := opts.MaxPayload
	if maxPayload == 0 {
		maxPayload = MaxPayloadDefault
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	if port > 0 {
		// Checking first turns a taken port into a clear error at once;
		// the server itself would only log it and never become ready.
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, &AddrInUseError{Addr: addr}
			}
			return nil, fmt.Errorf("natsserver: listening on %s: %w", addr, err)
		}
		_ = ln.Close()
	}

	sopts := &server.Options{
		Host:       host,
		Port:       port,
		MaxPayload: maxPayload,
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		NoSigs:     true,
	}
	if opts.Accounts != nil {
		if err := operatorMode(sopts, opts.Accounts, opts.ResolverDir); err != nil {
			return nil, err
		}
	}
	s, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("natsserver: configuring the server: %w", err)
	}
	logger := &logAdapter{logger: opts.Logger, fatal: make(chan string, 1)}
	if logger.logger == nil {
		logger.logger = slog.New(slog.DiscardHandler)
	}
	// Always install the adapter: it catches fatal errors (which the
	// server only logs), and the server's own logger would exit the
	// process on one.
	s.SetLogger(logger, false, false)
	s.Start()

	deadline := time.Now().Add(ReadyTimeout)
	for !s.ReadyForConnections(100 * time.Millisecond) {
		select {
		case msg := <-logger.fatal:
			s.Shutdown()
			s.WaitForShutdown()
			if strings.Contains(msg, "address already in use") {
				return nil, &AddrInUseError{Addr: addr}
			}
			return nil, fmt.Errorf("natsserver: starting: %s", msg)
		default:
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			s.WaitForShutdown()
			return nil, fmt.Errorf("natsserver: not ready for connections on %s after %s", addr, ReadyTimeout)
		}
	}
	if !s.JetStreamEnabled() {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("natsserver: JetStream did not start (store dir %s)", opts.StoreDir)
	}
	return s, nil
}

// operatorMode makes the server trust the keyring's operator and resolve
// accounts from dir, where it stores every account the keyring knows.
func operatorMode(sopts *server.Options, k *natsauth.Keyring, dir string) error {
	if dir == "" {
		return errors.New("natsserver: ResolverDir is required in operator mode")
	}
	opJWT, err := k.OperatorJWT()
	if err != nil {
		return err
	}
	op, err := jwt.DecodeOperatorClaims(opJWT)
	if err != nil {
		return fmt.Errorf("natsserver: decoding the operator: %w", err)
	}
	res, err := server.NewDirAccResolver(dir, 0, time.Minute, server.RenameDeleted)
	if err != nil {
		return fmt.Errorf("natsserver: account resolver in %s: %w", dir, err)
	}
	accounts, err := k.Accounts()
	if err != nil {
		return err
	}
	for _, a := range accounts {
		if err := res.Store(a.PublicKey, a.JWT); err != nil {
			return fmt.Errorf("natsserver: storing account %s: %w", a.Name, err)
		}
	}
	sopts.TrustedOperators = []*jwt.OperatorClaims{op}
	sopts.SystemAccount = k.SystemAccountPublicKey()
	sopts.AccountResolver = res
	return nil
}

// Connect opens a client connection to s through an in-process pipe, with
// no TCP. name identifies the connection in the server's monitoring.
// opts are applied after Fairway's, so they may override them.
func Connect(s *server.Server, name string, opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{nats.InProcessServer(s), nats.Name(name)}, opts...)
	nc, err := nats.Connect(s.ClientURL(), all...)
	if err != nil {
		return nil, fmt.Errorf("natsserver: connecting %q in process: %w", name, err)
	}
	return nc, nil
}

// logAdapter routes the server's log calls to slog. Debug and trace output
// are dropped; a fatal error is logged as an error (never exiting the
// process) and passed to Start.
type logAdapter struct {
	logger *slog.Logger
	fatal  chan string
}

func (l *logAdapter) Noticef(format string, v ...any) { l.logger.Debug(fmt.Sprintf(format, v...)) }
func (l *logAdapter) Warnf(format string, v ...any)   { l.logger.Warn(fmt.Sprintf(format, v...)) }
func (l *logAdapter) Errorf(format string, v ...any)  { l.logger.Error(fmt.Sprintf(format, v...)) }
func (l *logAdapter) Debugf(string, ...any)           {}
func (l *logAdapter) Tracef(string, ...any)           {}

func (l *logAdapter) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.logger.Error(msg)
	select {
	case l.fatal <- msg:
	default:
	}
}
