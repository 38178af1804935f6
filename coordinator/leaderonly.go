package coordinator

import (
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go"
)

// leaderOnly is a subscription held only while this coordinator leads the
// journal's partition (journal.LeaderConfig.Leading): dispatch requests,
// which only the leader can claim for, and the API requests that followers
// forward to it (forwardToLeader). While no coordinator leads, a request
// hears no responder at once, rather than waiting at a follower. The
// requests in hand when it stops are answered (drained).
type leaderOnly struct {
	nc      *nats.Conn
	log     *slog.Logger
	subject string
	what    string // for the log: what it answers

	mu      sync.Mutex
	handler nats.MsgHandler // nil until set: serve does nothing before
	sub     *nats.Subscription
}

// setHandler sets what answers the requests.
func (s *leaderOnly) setHandler(h nats.MsgHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

// serve subscribes (on) or drains the subscription (off).
func (s *leaderOnly) serve(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case on && s.sub == nil && s.handler != nil:
		sub, err := s.nc.QueueSubscribe(s.subject, queueGroup, s.handler)
		if err == nil {
			err = sub.SetPendingLimits(nats.DefaultSubPendingMsgsLimit, subPendingBytes)
		}
		if err != nil {
			s.log.Error("answering "+s.what+" as the journal's leader: subscribing failed", "subject", s.subject, "error", err)
			return
		}
		s.sub = sub
	case !on && s.sub != nil:
		_ = s.sub.Drain()
		s.sub = nil
	}
}
