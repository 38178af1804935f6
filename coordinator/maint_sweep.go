package coordinator

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/fairwayhq/fairway/internal/store"
)

// Defaults of sweepConfig.
const (
	sweepInterval = time.Second
	sweepBatch    = 1000
	// goneLeases is how many leases an executor may stay silent before it
	// is marked gone: long enough that a busy executor or a short network
	// hiccup is not taken for dead (its leases expire after one).
	goneLeases = 3
)

// sweepConfig configures the lease sweeper.
type sweepConfig struct {
	// Interval is how often it sweeps. Defaults to sweepInterval.
	Interval time.Duration
	// Batch caps the jobs one statement releases, triggers or expires.
	// Defaults to sweepBatch.
	Batch int
	// Lease is how long a job handed to an executor stays its own without
	// a heartbeat (Config.Lease); PostgreSQL must have been reachable for
	// as long before leases are expired. Required.
	Lease time.Duration
	// RetryDelay is the delay before the first retry (Config.RetryDelay).
	RetryDelay time.Duration
	// GoneAfter is how long an executor may stay silent before it is
	// marked gone. Defaults to goneLeases leases.
	GoneAfter time.Duration
}

func (c sweepConfig) withDefaults() sweepConfig {
	if c.Interval <= 0 {
		c.Interval = sweepInterval
	}
	if c.Batch <= 0 {
		c.Batch = sweepBatch
	}
	if c.GoneAfter <= 0 {
		c.GoneAfter = goneLeases * c.Lease
	}
	return c
}

// leaseSweeper recovers the jobs of executors that died or lost their
// connection: when a lease runs out the attempt counts as failed and the
// job is due again at once. It also releases the pending jobs whose
// trigger time has come, fails the jobs that expired before they started,
// and marks gone the executors silent for several leases. It sweeps on the
// coordinator that leads the maintenance only.
type leaseSweeper struct {
	cfg   sweepConfig
	store *store.Store
	log   *slog.Logger
	lead  *leadership
	// afterChange follows up the changes a sweep made (Coordinator.afterChange).
	afterChange func([]store.Applied)
}

func newLeaseSweeper(cfg sweepConfig, st *store.Store, log *slog.Logger, lead *leadership, afterChange func([]store.Applied)) *leaseSweeper {
	return &leaseSweeper{cfg: cfg.withDefaults(), store: st, log: log, lead: lead, afterChange: afterChange}
}

// run sweeps every Interval until ctx ends.
//
// Leases are only expired, and executors marked gone, once PostgreSQL has
// been reachable for a whole lease: heartbeats sent while it was down (or
// before this coordinator started) were not recorded, and the executors'
// next ones must have a chance to renew their leases before they are
// judged lost.
func (s *leaseSweeper) run(ctx context.Context) {
	ticker := time.NewTicker(s.cfg.Interval)
	defer ticker.Stop()
	reachableSince := time.Now()
	var downSince time.Time // zero while PostgreSQL answers
	unreachable := func(err error) {
		if downSince.IsZero() && ctx.Err() == nil {
			downSince = time.Now()
			s.log.Warn("PostgreSQL unreachable: submissions and reports wait in JetStream; leases are not expired until it has been back for a lease", "error", err)
		}
		reachableSince = time.Now()
	}
	reachable := func() {
		if !downSince.IsZero() {
			s.log.Warn("PostgreSQL reachable again", "outage", time.Since(downSince).Round(time.Millisecond).String())
			downSince = time.Time{}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if !s.lead.leading() {
			// Another coordinator runs the maintenance; whether PostgreSQL
			// answers is known from the lead's renewal.
			if err := s.lead.lastErr(); err != nil {
				unreachable(err)
			} else {
				reachable()
			}
			continue
		}
		if time.Since(reachableSince) < s.cfg.Lease {
			if err := s.store.Ping(ctx); err != nil {
				unreachable(err)
			} else {
				reachable()
				s.timedChanges(ctx)
			}
			continue
		}
		applied, err := s.store.ExpireLeases(ctx, s.cfg.Batch, s.cfg.Lease, s.cfg.RetryDelay)
		if err != nil {
			unreachable(err)
			continue
		}
		reachable()
		s.timedChanges(ctx)
		s.markGone(ctx)
		if len(applied) > 0 {
			states := map[string]int{}
			for _, a := range applied {
				states[string(a.State)]++
			}
			s.log.Warn("leases expired: jobs of lost executors released", "jobs", len(applied), "states", states)
			s.afterChange(applied)
		}
	}
}

// timedChanges releases the pending jobs whose trigger time has come and
// fails the jobs that expired before they started.
func (s *leaseSweeper) timedChanges(ctx context.Context) {
	triggered, err := s.store.TriggerPending(ctx, s.cfg.Batch)
	if err != nil {
		s.log.Warn("releasing triggered pending jobs", "error", err)
	} else if len(triggered) > 0 {
		s.log.Info("pending jobs released: their trigger time came", "jobs", len(triggered))
		s.afterChange(triggered)
	}
	expired, err := s.store.ExpireJobs(ctx, s.cfg.Batch)
	if err != nil {
		s.log.Warn("expiring jobs", "error", err)
	} else if len(expired) > 0 {
		s.log.Info("jobs expired before they started", "jobs", len(expired))
		s.afterChange(expired)
	}
}

// markGone marks gone the executors silent for GoneAfter (goneLeases
// leases), and logs each one.
func (s *leaseSweeper) markGone(ctx context.Context) {
	gone, err := s.store.MarkExecutorsGone(ctx, s.cfg.GoneAfter)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("marking silent executors gone", "error", err)
		}
		return
	}
	for _, e := range gone {
		s.log.Warn("executor gone: no heartbeat for several leases; its tasks no longer count as run until it registers again",
			"executor", e.AppID, "instance", e.Instance, "host", e.Host, "tasks", strings.Join(e.Tasks, ","),
			"last_heartbeat", e.LastHeartbeat.Format(time.RFC3339))
	}
}
