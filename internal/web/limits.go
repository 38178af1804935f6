package web

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// Defaults of the bounds on the read-only role and on live streams (see
// Config).
const (
	defaultReadConcurrency  = 4
	defaultReadRate         = 20
	defaultReadBurst        = 40
	defaultStreamsMax       = 64
	defaultStreamsPerClient = 8
)

// limitError is a refusal of this server's own limits: a quota error, and
// when to try again (the Retry-After header).
type limitError struct {
	err   *fairway.Error
	retry time.Duration
}

func (e *limitError) Error() string { return e.err.Error() }
func (e *limitError) Unwrap() error { return e.err }

// setRetryAfter sets a 429's Retry-After header, in whole seconds (at
// least 1): from a limit of this server, or 1 for a coordinator's quota.
func setRetryAfter(w http.ResponseWriter, err error) {
	retry := time.Second
	var le *limitError
	if errors.As(err, &le) {
		retry = max(retry, le.retry)
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
}

// laneOf is the lane of the coordinators' operator API that a caller's
// requests wait in (events.LaneHeader): the read-only role's apart from
// the admins', and both apart from the operator's own, so that no
// read-only user delays an admin or an operator.
func laneOf(r role) string {
	if r == roleAdmin {
		return events.LaneWebAdmin
	}
	return events.LaneWebReadOnly
}

// readLimits bounds what the read-only role asks of the coordinators
// through this server, before any request reaches NATS: at most
// ReadConcurrency of its requests at once, and ReadRate a second (bursts
// of ReadBurst) for its token, which every session logged in with it
// shares. A request beyond is answered 429 at once, with Retry-After.
type readLimits struct {
	running chan struct{}
	bucket  tokenBucket
}

func newReadLimits(cfg Config) *readLimits {
	return &readLimits{running: make(chan struct{}, cfg.ReadConcurrency),
		bucket: tokenBucket{rate: cfg.ReadRate, burst: float64(cfg.ReadBurst), tokens: float64(cfg.ReadBurst)}}
}

// admit takes a token and, unless stream, a place among the requests
// running; release gives the place back.
func (l *readLimits) admit(stream bool, now time.Time) (release func(), err error) {
	if ok, wait := l.bucket.take(now); !ok {
		return nil, &limitError{retry: wait, err: &fairway.Error{Code: fairway.CodeQuota, Field: "token",
			Message: fmt.Sprintf("the read-only token is over its rate of %g requests/s (bursts of %g) on this dashboard server, shared by all its sessions: retry in %s",
				l.bucket.rate, l.bucket.burst, max(wait, time.Millisecond).Round(time.Millisecond))}}
	}
	if stream {
		return func() {}, nil
	}
	select {
	case l.running <- struct{}{}:
		return func() { <-l.running }, nil
	default:
		return nil, &limitError{retry: time.Second, err: &fairway.Error{Code: fairway.CodeQuota, Field: "role",
			Message: fmt.Sprintf("the read-only role has %d requests running on this dashboard server, as many as it may: retry when they are answered", cap(l.running))}}
	}
}

// tokenBucket allows rate events a second, in bursts of up to burst.
type tokenBucket struct {
	rate, burst float64
	mu          sync.Mutex
	tokens      float64
	at          time.Time
}

// take takes a token, or says how long until one is there.
func (b *tokenBucket) take(now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.at.IsZero() {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.at).Seconds()*b.rate)
	}
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, max(time.Duration((1-b.tokens)/b.rate*float64(time.Second)), time.Millisecond)
}

// streamBudget bounds the live streams open at once: perRole of each role
// (so the read-only role can never take the admins' streams), and
// perClient of each session or bearer token (so one browser or script
// cannot take its whole role's).
type streamBudget struct {
	perRole, perClient int
	mu                 sync.Mutex
	roles              map[role]int
	clients            map[string]int
}

func newStreamBudget(perRole, perClient int) *streamBudget {
	return &streamBudget{perRole: perRole, perClient: perClient, roles: map[role]int{}, clients: map[string]int{}}
}

// take takes a stream of c's budgets, or refuses it (quota); release
// gives it back.
func (b *streamBudget) take(c caller) (release func(), err error) {
	client := c.session
	if client == "" {
		client = "bearer " + c.role.String() // the role's token
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.clients[client] >= b.perClient:
		who := "this session"
		if c.session == "" {
			who = "the " + c.role.String() + " token (without a session)"
		}
		return nil, &limitError{retry: 5 * time.Second, err: &fairway.Error{Code: fairway.CodeQuota, Field: "streams",
			Message: fmt.Sprintf("%s has %d live streams open, as many as it may: close a dashboard tab, or reload it later", who, b.clients[client])}}
	case b.roles[c.role] >= b.perRole:
		return nil, &limitError{retry: 5 * time.Second, err: &fairway.Error{Code: fairway.CodeQuota, Field: "streams",
			Message: fmt.Sprintf("the %s role has %d live streams open on this dashboard server, as many as it may: close a dashboard tab, or reload it later", c.role, b.roles[c.role])}}
	}
	b.clients[client]++
	b.roles[c.role]++
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.clients[client]--; b.clients[client] <= 0 {
			delete(b.clients, client)
		}
		b.roles[c.role]--
	}, nil
}

// open says how many streams c's role has open.
func (b *streamBudget) open(r role) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.roles[r]
}
