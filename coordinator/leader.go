// One coordinator leads the maintenance.

package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway/internal/store"
)

// The maintenance lead's lease, on PostgreSQL's clock, and how often its
// holder renews it (and the others try to take it). A leader that dies
// without giving it up is replaced within leaderTTL.
const (
	leaderTTL   = 3 * time.Second
	leaderRenew = time.Second
)

// leadership elects the one coordinator that runs the maintenance: the
// leader-only services (leaderServices: lease expiry, timed releases and
// expiry, marking silent executors gone, retention, periodic firing),
// which it starts when it gains the lead and stops when it loses it, as
// River's QueueMaintainerLeader does; the services themselves know
// nothing of the lead. The sweep of blocked jobs, part of a service that
// runs everywhere, asks leading. Every coordinator ran the maintenance
// every second before, so its load on the database grew with the
// coordinators. The hot path (ingest, claims, reports, events) stays on
// every coordinator.
//
// The lead is a lease in PostgreSQL (fairway_leader), renewed every
// second. No fencing is needed: every maintenance statement is safe to
// run on two coordinators at once (they all ran them before), so a leader
// that lost its lease without noticing (a stalled process) does no harm
// for the second it takes to notice.
type leadership struct {
	store    *store.Store
	holder   string
	log      *slog.Logger
	services *leaderServices // started with the lead, stopped without it
	// eligible, when set, says whether this coordinator may lead the
	// maintenance now: only while it leads the journal's partition, whose leader alone can release the jobs of
	// lost executors (a maintenance leader that did not lead the journal
	// left them held for ever).
	eligible func() bool

	leads atomic.Bool
	// tries counts the tries to take or renew the lead: what a test awaits
	// to know that a coordinator tried.
	tries     atomic.Int64
	mu        sync.Mutex
	answering time.Time // since when PostgreSQL has answered every try
}

// run takes or renews the lead every leaderRenew (Start made the first
// try) until ctx ends, then gives it up.
func (l *leadership) run(ctx context.Context) {
	t := time.NewTicker(leaderRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if l.leads.Swap(false) {
				l.services.stop()
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				if err := l.store.ReleaseMaintenance(rctx, l.holder); err != nil {
					l.log.Info("could not give up the maintenance lead; another coordinator takes it when its lease runs out", "error", err)
				}
				cancel()
			}
			return
		case <-t.C:
			l.try(ctx)
		}
	}
}

func (l *leadership) try(ctx context.Context) {
	if l.eligible != nil && !l.eligible() {
		l.giveUp(ctx)
		return
	}
	term, leads, err := l.store.LeadMaintenance(ctx, l.holder, leaderTTL)
	if ctx.Err() != nil {
		return
	}
	defer l.tries.Add(1)
	l.mu.Lock()
	if err != nil || l.answering.IsZero() {
		l.answering = time.Now()
	}
	l.mu.Unlock()
	was := l.leads.Swap(leads)
	switch {
	case leads && !was:
		l.log.Info("this coordinator leads the maintenance now (lost executors, retention, periodic tasks)", "term", term)
		l.services.start(ctx)
	case !leads && was && err != nil:
		l.log.Warn("this coordinator stopped leading the maintenance: PostgreSQL did not answer", "error", err)
		l.services.stop()
	case !leads && was:
		l.log.Info("another coordinator leads the maintenance now")
		l.services.stop()
	}
}

// giveUp is a try of a coordinator that may not lead (eligible): it gives
// the lead up if it holds it, and PostgreSQL's answers are counted again
// from its next try (the sweeper's gate then waits a lease).
func (l *leadership) giveUp(ctx context.Context) {
	defer l.tries.Add(1)
	l.mu.Lock()
	l.answering = time.Time{}
	l.mu.Unlock()
	if !l.leads.Swap(false) {
		return
	}
	l.log.Info("this coordinator gives up the maintenance lead: it no longer leads the journal's partition")
	l.services.stop()
	if err := l.store.ReleaseMaintenance(ctx, l.holder); err != nil && ctx.Err() == nil {
		l.log.Info("could not give up the maintenance lead; another coordinator takes it when its lease runs out", "error", err)
	}
}

// answeringSince is since when PostgreSQL has answered every try to take
// or renew the lead (the first try's time, if it always has).
func (l *leadership) answeringSince() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answering
}

// leaderServices are the loops that run on the coordinator that leads
// the maintenance only: started, each on its goroutine, when it gains the
// lead, and stopped (cancelled, and waited for) when it loses it or stops.
// A leader-only service is one more loop in the list Coordinator.New
// gives it.
type leaderServices struct {
	loops []func(context.Context)

	mu     sync.Mutex
	cancel context.CancelFunc // nil while stopped
	wg     sync.WaitGroup
}

// start runs the loops until stop or until ctx ends; a second start
// before a stop does nothing, as do both on a nil set.
func (s *leaderServices) start(ctx context.Context) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	for _, loop := range s.loops {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			loop(ctx)
		}()
	}
}

// stop cancels the loops and waits for them to return.
func (s *leaderServices) stop() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	s.wg.Wait()
}
