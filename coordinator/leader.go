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

// leadership elects the one coordinator that runs the maintenance loops:
// lease expiry, timed releases and expiry, marking silent executors gone
// (leaseSweeper), retention (pruner), periodic firing (periodicFirer) and
// the sweep of blocked jobs (dependents), which each check leads before
// they work. Every coordinator ran them every second before, so their
// load on the database grew with the coordinators. The hot path (ingest,
// claims, reports, events) stays on every coordinator.
//
// The lead is a lease in PostgreSQL (fairway_leader), renewed every
// second. No fencing is needed: every maintenance statement is safe to
// run on two coordinators at once (they all ran them before), so a leader
// that lost its lease without noticing (a stalled process) does no harm
// for the second it takes to notice.
type leadership struct {
	store  *store.Store
	holder string
	log    *slog.Logger
	gained func() // called when the lead is taken

	leads atomic.Bool
	// tries counts the tries to take or renew the lead, and checks the
	// times a maintenance loop asked whether it leads (leading): what a
	// test awaits to know that a loop went round without the lead.
	tries, checks atomic.Int64
	mu            sync.Mutex
	err           error // of the last try; nil when PostgreSQL answered
}

// leading says whether this coordinator leads the maintenance now. The
// maintenance loops ask it on each round.
func (l *leadership) leading() bool {
	l.checks.Add(1)
	return l.leads.Load()
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
	term, leads, err := l.store.LeadMaintenance(ctx, l.holder, leaderTTL)
	if ctx.Err() != nil {
		return
	}
	defer l.tries.Add(1)
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
	was := l.leads.Swap(leads)
	switch {
	case leads && !was:
		l.log.Info("this coordinator leads the maintenance now (lease expiry, timers, retention, periodic tasks)", "term", term)
		l.gained()
	case !leads && was && err != nil:
		l.log.Warn("this coordinator stopped leading the maintenance: PostgreSQL did not answer", "error", err)
	case !leads && was:
		l.log.Info("another coordinator leads the maintenance now")
	}
}

// lastErr is the error of the last try to take or renew the lead: nil
// when PostgreSQL answered.
func (l *leadership) lastErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
