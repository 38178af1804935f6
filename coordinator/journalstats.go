package coordinator

import (
	"context"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/store"
)

// journalStatsLive is what the journal's unfinished jobs add to the stats
// (store.StatsLive) over the window from since to now: their intervals'
// sets, started held jobs and counts, from
// the partition's state as of the request (journal.Leader.LiveStats,
// Counts); the jobs that ended are read from their records, as on the row
// engine.
func (c *Coordinator) journalStatsLive(ctx context.Context, group string, since, now time.Time, bucket time.Duration) (*store.StatsLive, error) {
	sets, held, err := c.journal.leader.LiveStats(ctx, group, since, now, bucket)
	if err != nil {
		return nil, journalError(err)
	}
	queue, err := c.journal.leader.Counts(ctx, group, 0, now)
	if err != nil {
		return nil, journalError(err)
	}
	return &store.StatsLive{Sets: sets, Held: held, Queue: queue}, nil
}

// groupShares are the groups' shares of the slot-time over window (store.GroupShares):
// on the journal, with its running jobs from the partition's state.
func groupShares(ctx context.Context, st *store.Store, e *journalEngine, window time.Duration) ([]fairway.GroupShare, error) {
	var running []journal.Running
	if e != nil {
		var err error
		if running, err = e.leader.RunningJobs(ctx); err != nil {
			return nil, journalError(err)
		}
	}
	return st.GroupShares(ctx, window, running)
}
