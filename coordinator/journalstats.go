package coordinator

import (
	"context"
	"slices"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/store"
)

// statsLive is what the journal's unfinished jobs add to the stats
// (store.StatsLive) over the window from since to now: their intervals'
// sets, started held jobs and counts, from the partitions' states as of
// the request (journal.Leader.LiveStats, Counts; a group's are in its
// partition alone); the jobs that ended are read from their records, as
// on the row engine.
func (ps partitions) statsLive(ctx context.Context, group string, since, now time.Time, bucket time.Duration) (*store.StatsLive, error) {
	out := &store.StatsLive{}
	for _, e := range ps {
		sets, held, err := e.leader.LiveStats(ctx, group, since, now, bucket)
		if err != nil {
			return nil, journalError(err)
		}
		queue, err := e.leader.Counts(ctx, group, 0, now)
		if err != nil {
			return nil, journalError(err)
		}
		out.Sets, out.Held, out.Queue = append(out.Sets, sets...), append(out.Held, held...), append(out.Queue, queue...)
	}
	return out, nil
}

// groupShares are the groups' shares of the slot-time over window
// (store.GroupShares): on the journal, with their running jobs from the
// partitions' states, over the partitions' databases and the home one
// (which holds the weights).
func groupShares(ctx context.Context, home *store.Store, ps partitions, window time.Duration) ([]fairway.GroupShare, error) {
	stores := ps.stores()
	if !slices.Contains(stores, home) {
		stores = append([]*store.Store{home}, stores...)
	}
	lists := make([][]fairway.GroupShare, 0, len(stores))
	for _, st := range stores {
		var running []journal.Running
		for _, e := range ps {
			if e.store != st {
				continue
			}
			r, err := e.leader.RunningJobs(ctx)
			if err != nil {
				return nil, journalError(err)
			}
			running = append(running, r...)
		}
		l, err := st.GroupShares(ctx, window, running)
		if err != nil {
			return nil, err
		}
		lists = append(lists, l)
	}
	if len(lists) == 1 {
		return lists[0], nil
	}
	return store.MergeShares(lists...), nil
}

// groupShares are the cluster's groups' shares over window.
func (c *Coordinator) groupShares(ctx context.Context, window time.Duration) ([]fairway.GroupShare, error) {
	return groupShares(ctx, c.store, c.parts, window)
}
