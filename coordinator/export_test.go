package coordinator

import (
	"context"
	"time"

	"github.com/fairwayhq/fairway"
	dto "github.com/prometheus/client_model/go"

	"github.com/nats-io/nats.go/jetstream"
)

// FirePeriodic fires the periodic tasks due at the coordinator's clock now,
// as its periodic loop does when their time comes.
func (c *Coordinator) FirePeriodic(ctx context.Context) { c.periodic.fire(ctx) }

// Ingest stores a batch of submission messages, as the ingest consumer
// does with each batch it gets.
func (c *Coordinator) Ingest(ctx context.Context, msgs []jetstream.Msg) { c.ingest.handle(ctx, msgs) }

// RunJournal runs the coordinator's journal engine alone, without Start
// (no consumer, no API), until ctx ends, and returns once it leads the
// partition: for a test that hands the coordinator deliveries itself
// (Ingest).
func (c *Coordinator) RunJournal(ctx context.Context) error {
	if err := c.store.OpenJournal(ctx); err != nil {
		return err
	}
	c.clead.try(ctx) // the cluster's lead, which the partitions follow
	go c.clead.run(ctx)
	for _, e := range c.parts {
		go e.run(ctx)
	}
	for !c.parts.first().leads.Load() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// Job reads a job as the API's get does (the partition's state, or its
// record).
func (c *Coordinator) Job(ctx context.Context, group, id string) (*fairway.Job, error) {
	return c.parts.of(group).get(ctx, group, id)
}

// Unfinished counts group's unfinished jobs (the partition's state).
func (c *Coordinator) Unfinished(ctx context.Context, group string) (int, error) {
	n, err := c.parts.of(group).leader.LiveOf(ctx, []string{group})
	return n[group], err
}

// SetAPIHook makes every API request call hook (with its subject's group,
// "" on the operator API, and its verb) on its worker before it is
// answered; tests use it to hold requests in flight.
func (c *Coordinator) SetAPIHook(hook func(group, verb string)) { c.apiHook.Store(&hook) }

// Splits says how many batches of submissions were split in halves to find
// one that PostgreSQL refuses (the per-row fallback's successor).
func (c *Coordinator) Splits() int64 { return c.ingest.splits.Load() }

// Parked says how many dispatch requests the coordinator holds (long polls
// of idle executors).
func (c *Coordinator) Parked() int {
	return c.dispatcher.parking.len()
}

// LeadsMaintenance says whether the coordinator leads the maintenance now.
func (c *Coordinator) LeadsMaintenance() bool { return c.lead != nil && c.lead.leads.Load() }

// MaintenanceTries counts the coordinator's tries to take or renew the
// maintenance lead.
func (c *Coordinator) MaintenanceTries() int64 { return c.lead.tries.Load() }

// ServiceLogger is serviceLogger, for the package's external tests.
var ServiceLogger = serviceLogger

// len says how many requests are parked.
func (p *parking) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reqs)
}

// Forwarded counts the API requests the coordinator forwarded to the
// journal's leader.
func (c *Coordinator) Forwarded() float64 {
	var m dto.Metric
	if err := c.metrics.forwarded.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// WaitsHeld counts the wait requests the coordinator holds.
func (c *Coordinator) WaitsHeld() int { return c.waits.held() }

// Holder names the coordinator in the partitions' leases.
func (c *Coordinator) Holder() string { return c.lead.holder }

// KeepEligibleReadings makes every partition keep its readings of
// eligible weight for d, as long as a fold does not drop them.
func (c *Coordinator) KeepEligibleReadings(d time.Duration) {
	for _, e := range c.parts {
		e.eligibleMu.Lock()
		e.eligibleTTL = d
		e.eligibleMu.Unlock()
	}
}

// ExpireHomeReadings makes the next dispatch read again what it keeps of
// the home database: the instances' registrations and the concurrency
// limits (as when their time-to-live ends).
func (c *Coordinator) ExpireHomeReadings() {
	c.dispatcher.regMu.Lock()
	for k, r := range c.dispatcher.regs {
		r.at = time.Time{}
		c.dispatcher.regs[k] = r
	}
	c.dispatcher.regMu.Unlock()
	for _, e := range c.parts {
		e.limits.mu.Lock()
		e.limits.at = time.Time{}
		e.limits.mu.Unlock()
	}
}

// LeadsPartition says whether this coordinator leads partition p.
func (c *Coordinator) LeadsPartition(p int) bool { return c.parts[p].leads.Load() }
