package coordinator

import (
	"sync"
	"time"
)

// stoppingTTL is how long the leader remembers an executor instance that
// said it stops: past the requests it sent before saying so (a dispatch
// request waits at most maxParkWait) and the reports of the jobs it
// releases as it stops (sent again for seconds at most).
const stoppingTTL = 10 * time.Minute

// stoppingCap bounds the instances remembered; beyond it the expired ones
// are forgotten, then any (their jobs' releases then keep their attempt,
// as an executor's that did not say it stops).
const stoppingCap = 10_000

// stoppingInstances are the executor instances that said they stop
// (events.DispatchRequest.Stopping): the leader hands them no job, and
// the jobs they release give their attempt back (journal.Item.GiveBack).
// An instance is an executor's run (a new one each Start): one that stops
// never asks again.
type stoppingInstances struct {
	mu sync.Mutex
	at map[registrationKey]time.Time
}

// mark records that the instance stops.
func (s *stoppingInstances) mark(app, instance string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.at == nil {
		s.at = map[registrationKey]time.Time{}
	}
	if len(s.at) >= stoppingCap {
		for k, t := range s.at {
			if now.Sub(t) >= stoppingTTL {
				delete(s.at, k)
			}
		}
		for k := range s.at {
			if len(s.at) < stoppingCap {
				break
			}
			delete(s.at, k)
		}
	}
	s.at[registrationKey{app, instance}] = now
}

// has says whether the instance said it stops (within stoppingTTL).
func (s *stoppingInstances) has(app, instance string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[registrationKey{app, instance}]
	return ok && time.Since(t) < stoppingTTL
}
