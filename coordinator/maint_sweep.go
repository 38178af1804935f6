package coordinator

import (
	"context"
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
	cfg sweepConfig
	serviceBase
	// answeringSince is since when PostgreSQL has answered the lead's
	// renewals (leadership.answeringSince).
	answeringSince func() time.Time
	// afterChange follows up the changes a sweep made (Coordinator.afterChange).
	afterChange func([]store.Applied)
	// journal, when set, gives back the jobs of lost executors that the
	// journal's leader holds (Config.Engine), as the row engine's leases
	// expire.
	journal *journalEngine
}

func newLeaseSweeper(cfg sweepConfig, b serviceBase, answeringSince func() time.Time, afterChange func([]store.Applied)) *leaseSweeper {
	return &leaseSweeper{cfg: cfg.withDefaults(), serviceBase: b, answeringSince: answeringSince, afterChange: afterChange}
}

// expiryGate says when the sweeper may judge executors lost: once
// PostgreSQL has been reachable, and this process has run without standing
// still, for a whole lease. Heartbeats sent while PostgreSQL was down (or
// before this coordinator started) were not recorded; those that came
// while this process stood still (a long GC pause, a VM or container
// frozen, a machine starved of CPU) wait in its subscriptions, unrecorded.
// Either way the executors' next heartbeats must have a chance to renew
// their leases before a sweep takes live executors for lost.
type expiryGate struct {
	interval, lease time.Duration
	since           time.Time // since when PostgreSQL answered and the process ran
	lastTick        time.Time
}

// newExpiryGate is the gate of a sweeper that starts at now, PostgreSQL
// having answered since answering.
func newExpiryGate(cfg sweepConfig, answering, now time.Time) *expiryGate {
	return &expiryGate{interval: cfg.Interval, lease: cfg.Lease, since: answering, lastTick: now}
}

// tick records a tick of the sweeper at now and returns by how much it
// came late, when by more than half a lease: this process stood still, and
// the gate closes for a lease.
func (g *expiryGate) tick(now time.Time) (late time.Duration) {
	gap := now.Sub(g.lastTick)
	g.lastTick = now
	if gap <= g.interval+g.lease/2 {
		return 0
	}
	g.since = now
	return gap - g.interval
}

// unreachable records that PostgreSQL did not answer at now: the gate
// closes for a lease.
func (g *expiryGate) unreachable(now time.Time) { g.since = now }

// open says whether leases may be expired, and executors marked gone, at
// now.
func (g *expiryGate) open(now time.Time) bool { return now.Sub(g.since) >= g.lease }

// run sweeps every Interval until ctx ends, expiring leases only while
// its expiryGate is open.
func (s *leaseSweeper) run(ctx context.Context) {
	ticker := time.NewTicker(s.cfg.Interval)
	defer ticker.Stop()
	// PostgreSQL may have answered the lead's renewals for a lease
	// already: the gate is open at once then.
	gate := newExpiryGate(s.cfg, s.answeringSince(), time.Now())
	var downSince time.Time // zero while PostgreSQL answers
	unreachable := func(err error) {
		if downSince.IsZero() && ctx.Err() == nil {
			downSince = time.Now()
			s.log.Warn("PostgreSQL unreachable: submissions and reports wait in JetStream; leases are not expired until it has been back for a lease", "error", err)
		}
		gate.unreachable(time.Now())
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
		if late := gate.tick(time.Now()); late > 0 {
			s.log.Warn("this coordinator stood still (starved of CPU, or paused): leases are not expired until it has run for a lease, so that the heartbeats that came meanwhile are recorded first",
				"late_by", late.Round(time.Millisecond).String(), "lease", s.cfg.Lease.String())
		}
		if !gate.open(time.Now()) {
			if err := s.store.Ping(ctx); err != nil {
				unreachable(err)
			} else {
				reachable()
				if s.journal == nil {
					s.timedChanges(ctx)
				}
			}
			continue
		}
		if s.journal != nil {
			// The journal's leader holds the jobs, their timers and
			// expiries: fairway_job has records only.
			if err := s.store.Ping(ctx); err != nil {
				unreachable(err)
				continue
			}
			reachable()
			s.journal.releaseLost(ctx, s.cfg.Lease)
			s.markGone(ctx)
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
