package coordinator

import (
	"context"
	"time"

	"github.com/fairwayhq/fairway/internal/store"
)

// prunePause is the least time between the batches of the retention
// loop. Each pause also lasts at least as long as the batch before it
// took, so that a large backlog of expired jobs (after a retention is
// lowered, say) takes at most half of one PostgreSQL connection's time
// rather than the work's: a batch of 1,000 took 10–20 ms on the 2-core
// machine (docs/performance.md "Retention at the size of its batch"),
// about 30,000 jobs/s, where a fixed 100 ms held it to 10,000 below the
// drain's rate.
const prunePause = 10 * time.Millisecond

// pruneConfig configures the pruner.
type pruneConfig struct {
	// Retention is how long each final state is kept, and how often to
	// prune (Retention.Interval). Its defaults are Config's.
	Retention Retention
	// Batch caps the jobs one statement removes. Defaults to
	// store.PruneBatchDefault.
	Batch int
	// Pause is the least time between batches; a pause also lasts as
	// long as the batch before it took. Defaults to prunePause.
	Pause time.Duration
}

func (c pruneConfig) withDefaults() pruneConfig {
	c.Retention = c.Retention.withDefaults()
	if c.Batch <= 0 {
		c.Batch = store.PruneBatchDefault
	}
	if c.Pause <= 0 {
		c.Pause = prunePause
	}
	return c
}

// pruner removes the finished jobs past their retention, with their logs,
// every Retention.Interval, on the coordinator that leads the maintenance
// (its batches skip rows another transaction holds, such as a prune asked
// for through the API).
type pruner struct {
	cfg pruneConfig
	serviceBase
	// parts are the partitions, whose databases hold the records
	// (Coordinator.onJournal sets them).
	parts partitions
}

func newPruner(cfg pruneConfig, b serviceBase) *pruner {
	return &pruner{cfg: cfg.withDefaults(), serviceBase: b}
}

// run prunes at once and then every Retention.Interval, while this
// coordinator leads the maintenance, until ctx ends.
func (p *pruner) run(ctx context.Context) {
	tick := time.NewTicker(p.cfg.Retention.Interval)
	defer tick.Stop()
	for {
		p.pruneExpired(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// pruneExpired removes, batch by batch, the finished jobs past their
// retention.
func (p *pruner) pruneExpired(ctx context.Context) {
	for _, st := range p.parts.stores() {
		p.pruneIn(ctx, st)
	}
}

// pruneIn is pruneExpired in one database.
func (p *pruner) pruneIn(ctx context.Context, st *store.Store) {
	for _, a := range p.cfg.Retention.ages() {
		if a.age < 0 {
			continue
		}
		total := 0
		began := time.Now()
		for ctx.Err() == nil {
			batchBegan := time.Now()
			n, err := st.Prune(ctx, a.state, a.age, "", p.cfg.Batch)
			took := time.Since(batchBegan)
			total += n
			if err != nil {
				if ctx.Err() == nil {
					p.log.Warn("pruning finished jobs; trying again at the next round", "state", a.state, "error", err)
				}
				break
			}
			if n < p.cfg.Batch {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(max(p.cfg.Pause, took)):
			}
		}
		if total > 0 {
			p.log.Info("pruned finished jobs", "state", a.state, "older_than", a.age.String(), "jobs", total, "took", time.Since(began).Round(time.Millisecond).String())
		}
	}
}
