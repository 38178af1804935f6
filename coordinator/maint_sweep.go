package coordinator

import (
	"context"
	"strings"
	"time"
)

// Defaults of sweepConfig.
const (
	sweepInterval = time.Second
	// goneLeases is how many leases an executor may stay silent before it
	// is marked gone: long enough that a busy executor or a short network
	// hiccup is not taken for dead (its leases expire after one).
	goneLeases = 3
)

// sweepConfig configures the lease sweeper.
type sweepConfig struct {
	// Interval is how often it sweeps. Defaults to sweepInterval.
	Interval time.Duration
	// Lease is how long a job handed to an executor stays its own without
	// a heartbeat (Config.Lease); PostgreSQL must have been reachable for
	// as long before leases are expired. Required.
	Lease time.Duration
	// GoneAfter is how long an executor may stay silent before it is
	// marked gone. Defaults to goneLeases leases.
	GoneAfter time.Duration
}

func (c sweepConfig) withDefaults() sweepConfig {
	if c.Interval <= 0 {
		c.Interval = sweepInterval
	}
	if c.GoneAfter <= 0 {
		c.GoneAfter = goneLeases * c.Lease
	}
	return c
}

// leaseSweeper recovers the jobs of executors that died or lost their
// connection: when a lease runs out the attempt counts as failed and the
// job is due again at once (the journal's leader gives them back:
// journalEngine.releaseLost). It also marks gone the executors silent for
// several leases. It sweeps on the coordinator that leads the maintenance
// only. (The journal's leader keeps the timers of pending and expiring
// jobs itself.)
type leaseSweeper struct {
	cfg sweepConfig
	serviceBase
	// answeringSince is since when PostgreSQL has answered the lead's
	// renewals (leadership.answeringSince).
	answeringSince func() time.Time
	// journal's leader gives back the jobs of lost executors
	// (Coordinator.onJournal sets it).
	parts partitions
}

func newLeaseSweeper(cfg sweepConfig, b serviceBase, answeringSince func() time.Time) *leaseSweeper {
	return &leaseSweeper{cfg: cfg.withDefaults(), serviceBase: b, answeringSince: answeringSince}
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
		if err := s.store.Ping(ctx); err != nil {
			unreachable(err)
			continue
		}
		reachable()
		if !gate.open(time.Now()) {
			continue
		}
		for _, e := range s.parts {
			e.releaseLost(ctx, s.cfg.Lease)
		}
		s.markGone(ctx)
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
