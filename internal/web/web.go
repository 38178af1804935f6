// Package web serves Fairway's dashboard and its HTTP API.
//
// The server is a NATS client like any other: every request becomes a
// request to the coordinators' operator API (fairway.admin.…, and the
// per-group verbs on fairway.api.<group>.…), or, when Config.Group is set,
// to that one tenant's API. So it goes through the same authorisation and
// tenant scoping as the NATS API: a tenant's credential reaches its own
// group and nothing else, whatever the HTTP side asks. It needs no
// PostgreSQL credential and can run anywhere near NATS (fairway web), or
// inside fairway dev.
//
// On top of that, the HTTP side has two roles, each logged in with a
// token: admin (sees and changes everything the credential reaches) and
// read-only (sees no args or results, and changes nothing). A browser logs
// in once and holds a session cookie (HttpOnly, SameSite=Strict); every
// change it asks for carries the session's CSRF token. Scripts send the
// token as Authorization: Bearer instead.
//
// A read-only user cannot delay an admin or an operator: each role's
// requests wait in a lane of the operator API of their own on the
// coordinators (events.LaneHeader); the read-only role's requests are
// bounded in number and rate before they reach NATS; stats take a few
// windows and buckets only, cached, each computed once at a time; and
// each role, and each session, has its own budget of live streams.
//
// Nor can a slow client hold the server (Listen): each client address
// holds a bounded share of its connections (httpedge), and a request must
// arrive at a minimum rate.
package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/flight"
	"github.com/fairwayhq/fairway/internal/httpedge"
)

//go:embed ui
var uiFiles embed.FS

//go:embed openapi.json
var openAPI []byte

// Config configures a Server.
type Config struct {
	// Client reaches the coordinators. Required.
	Client *events.Client
	// AdminToken logs in as admin. Required, at least 16 characters.
	AdminToken string
	// ReadToken logs in as the read-only role; empty: no such role.
	ReadToken string
	// Group confines the server to one tenant's group, through its API.
	// Empty: every group, through the operator API.
	Group string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// SessionTTL is how long a browser session lasts. Defaults to 12 hours.
	SessionTTL time.Duration
	// StreamsMax caps the live event streams each role has open at once
	// (each one is a JetStream consumer): the read-only role has a budget
	// of its own, and cannot take the admins'. Defaults to 64.
	StreamsMax int
	// StreamsPerClient caps the live streams of one browser session, or of
	// one role's token sent as a bearer token. Defaults to 8.
	StreamsPerClient int
	// ReadConcurrency caps the read-only role's requests to the
	// coordinators running at once through this server; one more is
	// answered 429. Defaults to 4.
	ReadConcurrency int
	// ReadRate and ReadBurst bound the read-only token's requests: ReadRate
	// a second, in bursts of up to ReadBurst, shared by every session
	// logged in with it; one more is answered 429. Default 20 and 40.
	ReadRate  float64
	ReadBurst int
	// AdminTokenFile and ReadTokenFile name the files that hold the tokens
	// (fairway dev writes them into its dev dir), for the login page to
	// say where they are. Empty: the page names the configuration keys.
	AdminTokenFile string
	ReadTokenFile  string
	// Edge bounds the connections of each client address and of all of
	// them, and how slowly a request may arrive (Listen): at most 32
	// connections of an address at once (one more is answered 503 and
	// closed), 512 in all (one more waits); a request's headers their first
	// byte within 5 s, then 512 bytes a second, and its body likewise. A
	// zero field takes its default (httpedge's).
	Edge httpedge.Limits
}

// Server is the dashboard and HTTP API. It is an http.Handler.
type Server struct {
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	sessions *sessions
	streams  *streamBudget // the live streams open, per role and client
	read     *readLimits   // the read-only role's requests

	statsMu     sync.Mutex
	statsCache  map[string]statsEntry
	statsFlight flight.Group[string, *fairway.Stats]

	sharesAnswers sharesCache // GET /api/shares' answers
}

// New returns a server; it checks cfg.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("web: a client is required")
	case len(cfg.AdminToken) < 16:
		return nil, fairway.Invalid("web.admin-token", "missing or shorter than 16 characters: set web.admin-token (FAIRWAY_WEB_ADMIN_TOKEN) to a long random string")
	case cfg.ReadToken != "" && len(cfg.ReadToken) < 16:
		return nil, fairway.Invalid("web.read-token", "shorter than 16 characters")
	case cfg.ReadToken != "" && cfg.ReadToken == cfg.AdminToken:
		return nil, fairway.Invalid("web.read-token", "the same as web.admin-token: the read-only role needs a token of its own")
	}
	if cfg.Group != "" {
		if err := fairway.CheckName("web.group", cfg.Group); err != nil {
			return nil, err
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.StreamsMax <= 0 {
		cfg.StreamsMax = defaultStreamsMax
	}
	if cfg.StreamsPerClient <= 0 {
		cfg.StreamsPerClient = min(defaultStreamsPerClient, cfg.StreamsMax)
	}
	if cfg.ReadConcurrency <= 0 {
		cfg.ReadConcurrency = defaultReadConcurrency
	}
	if cfg.ReadRate <= 0 {
		cfg.ReadRate = defaultReadRate
	}
	if cfg.ReadBurst <= 0 {
		cfg.ReadBurst = max(defaultReadBurst, int(math.Ceil(cfg.ReadRate)))
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), sessions: newSessions(cfg.SessionTTL),
		streams: newStreamBudget(cfg.StreamsMax, cfg.StreamsPerClient), read: newReadLimits(cfg),
		statsCache: map[string]statsEntry{}}
	for _, r := range routes {
		s.mux.Handle(r.pattern, s.guard(r))
	}
	ui, _ := fs.Sub(uiFiles, "ui")
	static := http.FileServerFS(ui)
	s.mux.Handle("GET /", securityHeaders(static))
	if cfg.AdminTokenFile != "" || cfg.ReadTokenFile != "" {
		page, err := indexPage(ui, cfg)
		if err != nil {
			return nil, err
		}
		s.mux.Handle("GET /{$}", securityHeaders(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(page)
		})))
	}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return s, nil
}

// loginHintRE finds the login page's paragraph that says where the token is.
var loginHintRE = regexp.MustCompile(`(?s)<p id="login-hint">.*?</p>`)

// indexPage is the dashboard's page with a login paragraph that names the
// files holding the tokens (Config.AdminTokenFile and ReadTokenFile).
func indexPage(ui fs.FS, cfg Config) ([]byte, error) {
	page, err := fs.ReadFile(ui, "index.html")
	if err != nil {
		return nil, fmt.Errorf("web: reading the dashboard's page: %w", err)
	}
	if !loginHintRE.Match(page) {
		return nil, errors.New(`web: the dashboard's page has no <p id="login-hint">`)
	}
	where := func(role, file, key string) string {
		if file != "" {
			return role + " token is in <code>" + html.EscapeString(file) + "</code>"
		}
		return role + " token is the one set as <code>" + key + "</code>"
	}
	tokens := "The " + where("admin", cfg.AdminTokenFile, "web.admin-token")
	if cfg.ReadToken != "" {
		tokens += "; the " + where("read-only", cfg.ReadTokenFile, "web.read-token")
	}
	hint := `<p id="login-hint">Paste the dashboard token. <code>fairway dev</code> prints a link that logs you in. ` + tokens + `.</p>`
	return loginHintRE.ReplaceAllLiteral(page, []byte(hint)), nil
}

// ServeHTTP serves the dashboard and the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Listen serves on addr until ctx ends; it returns once listening, with
// the address it listens on (addr's port 0 picks one). The server is
// hardened, and bounded by Config.Edge: no client address holds more than
// its share of the connections, and a request that does not arrive at
// the minimum rate is cut, so a slow client (slowloris) delays no one else.
func (s *Server) Listen(ctx context.Context, addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("web.addr %s: %w", addr, err)
	}
	srv := hardened(s)
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	limits := s.cfg.Edge
	if limits.Logger == nil {
		limits.Logger = s.log
	}
	bounded := httpedge.Wrap(srv, ln, limits)
	go func() { _ = srv.Serve(bounded) }()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second) // ctx is done: 2 s more to shut down
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	return ln.Addr(), nil
}

// hardened is an HTTP server for h with the timeouts that keep slow or
// idle clients from holding connections: a request's headers within 10 s
// and its whole body within 30 s, however fast they arrive (Config.Edge
// cuts a slower one sooner), an idle keep-alive connection 2 minutes, 64
// KiB of headers. No write timeout: the live views stream for as long as
// they are open (bounded in number per role and per client,
// Config.StreamsMax and Config.StreamsPerClient); httpedge times a
// request's headers and body, not the server's watch of the connection
// while it answers.
func hardened(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
}

// securityHeaders keeps the dashboard's pages from being framed or from
// loading anything but their own files.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}
