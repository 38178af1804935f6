package coordinator

import (
	"context"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
)

// apiPartitions answers partitions: each partition of the journal as this
// coordinator follows it (every coordinator does), its lease and how far
// its events trail as PostgreSQL says.
func (c *Coordinator) apiPartitions(ctx context.Context, _ request) (events.Reply, error) {
	p, err := c.journal.partition(ctx)
	if err != nil {
		return events.Reply{}, err
	}
	return events.Reply{Partitions: []fairway.Partition{p}}, nil
}

// partition is the engine's partition as operators see it.
func (e *journalEngine) partition(ctx context.Context) (fairway.Partition, error) {
	st, err := e.leader.Status(ctx)
	if err != nil {
		return fairway.Partition{}, err
	}
	return fairway.Partition{
		Partition: int(st.Partition), Leader: st.Holder, Epoch: st.Epoch, LeaseLeftMS: st.Left.Milliseconds(),
		Database: e.store.Where(), Groups: st.Groups, Jobs: st.Jobs,
		UnpublishedRows: st.Unpublished, LagMS: st.Lag.Milliseconds(),
	}, nil
}
