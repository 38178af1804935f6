package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"time"
)

// role is what a login may do.
type role int

const (
	roleNone  role = iota
	roleRead       // sees everything but args and results; changes nothing
	roleAdmin      // sees and changes everything the NATS credential reaches
)

func (r role) String() string {
	switch r {
	case roleAdmin:
		return "admin"
	case roleRead:
		return "read"
	}
	return "none"
}

// sessionCookie names the browser's session cookie.
const sessionCookie = "fairway_session"

// csrfHeader carries a session's CSRF token on every change a browser asks
// for: a page of another site can make the browser send the cookie, but
// cannot read the token to send it along.
const csrfHeader = "X-CSRF-Token"

type session struct {
	role    role
	csrf    string
	expires time.Time
}

// sessions holds the browsers' sessions in memory: a restart logs them out.
type sessions struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]session
}

func newSessions(ttl time.Duration) *sessions { return &sessions{ttl: ttl, m: map[string]session{}} }

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) create(r role) (id string, sess session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for k, v := range s.m { // few sessions: a sweep per login is cheap
		if now.After(v.expires) {
			delete(s.m, k)
		}
	}
	id, sess = randomToken(), session{role: r, csrf: randomToken(), expires: now.Add(s.ttl)}
	s.m[id] = sess
	return id, sess
}

func (s *sessions) get(id string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[id]
	if !ok || time.Now().After(sess.expires) {
		delete(s.m, id)
		return session{}, false
	}
	return sess, true
}

func (s *sessions) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// roleOf is the role a token logs in as.
func (s *Server) roleOf(token string) role {
	eq := func(a, b string) bool { return b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
	switch {
	case eq(token, s.cfg.AdminToken):
		return roleAdmin
	case eq(token, s.cfg.ReadToken):
		return roleRead
	}
	return roleNone
}

// caller is who sent a request: its role, and whether it came with a
// browser's session cookie (so needs the CSRF token to change anything).
type caller struct {
	role    role
	session string // the session's id; "" for a bearer token
	csrf    string
}

// identify reads the caller from a bearer token or the session cookie.
func (s *Server) identify(r *http.Request) caller {
	if auth := r.Header.Get("Authorization"); auth != "" {
		token, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok {
			return caller{}
		}
		return caller{role: s.roleOf(strings.TrimSpace(token))}
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if sess, ok := s.sessions.get(c.Value); ok {
			return caller{role: sess.role, session: c.Value, csrf: sess.csrf}
		}
	}
	return caller{}
}

// crossSite says whether a request comes from another site's page: the
// browser says so (Sec-Fetch-Site), or its Origin is not this host.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		o, ok := strings.CutPrefix(origin, "http://")
		if !ok {
			o, ok = strings.CutPrefix(origin, "https://")
		}
		return !ok || o != r.Host
	}
	return false
}

func (s *Server) setSessionCookie(w http.ResponseWriter, r *http.Request, id string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}
