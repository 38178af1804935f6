package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"slices"
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
// Each role keeps at most maxSessionsPerRole: a login beyond ends that
// role's oldest session, so a flood of logins with one token neither grows
// memory without bound nor logs out anyone of another role (an operator
// stays logged in whatever the read-only token does). Lookups, logins and
// the sweep of expired sessions cost O(1) each, amortised.
type sessions struct {
	ttl time.Duration
	max int
	mu  sync.Mutex
	m   map[string]session
	// order is each role's session ids, oldest first (some may be gone
	// already: logged out, or expired and looked up); live counts those
	// that are not.
	order map[role][]string
	live  map[role]int
}

// maxSessionsPerRole bounds a role's sessions.
const maxSessionsPerRole = 1000

func newSessions(ttl time.Duration) *sessions {
	return &sessions{ttl: ttl, max: maxSessionsPerRole, m: map[string]session{}, order: map[role][]string{}, live: map[role]int{}}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) create(r role) (id string, sess session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	q := s.order[r]
	// Oldest first: the expired ones, the ones gone, and the oldest of a
	// full role.
	for len(q) > 0 {
		old, ok := s.m[q[0]]
		if ok && now.Before(old.expires) && s.live[r] < s.max {
			break
		}
		if ok {
			s.drop(q[0])
		}
		q = q[1:]
	}
	if len(q) > 2*s.max {
		// Ids of sessions gone behind a live one: compact, once in a while.
		q = slices.DeleteFunc(q, func(id string) bool { _, ok := s.m[id]; return !ok })
	}
	id, sess = randomToken(), session{role: r, csrf: randomToken(), expires: now.Add(s.ttl)}
	s.m[id] = sess
	s.live[r]++
	s.order[r] = append(q, id)
	return id, sess
}

// drop forgets a session (s.mu held).
func (s *sessions) drop(id string) {
	if sess, ok := s.m[id]; ok {
		delete(s.m, id)
		s.live[sess.role]--
	}
}

func (s *sessions) get(id string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[id]
	if !ok || time.Now().After(sess.expires) {
		s.drop(id)
		return session{}, false
	}
	return sess, true
}

func (s *sessions) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(id)
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
	// Secure whenever the request came over TLS; over the plain HTTP of a
	// local dashboard a Secure cookie would never come back.
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", MaxAge: maxAge, //nolint:gosec // G124: see above
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}
