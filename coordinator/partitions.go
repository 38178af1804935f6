package coordinator

import (
	"context"
	"net"
	"strconv"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/jackc/pgx/v5/pgxpool"
)

// apiPartitions answers partitions: each partition of the journal as this
// coordinator follows it (every coordinator does), its lease and how far
// its events trail as PostgreSQL says.
func (c *Coordinator) apiPartitions(ctx context.Context, _ request) (events.Reply, error) {
	p, _, err := c.journal.partition(ctx)
	if err != nil {
		return events.Reply{}, err
	}
	return events.Reply{Partitions: []fairway.Partition{p}}, nil
}

// partition is the engine's partition as operators see it, and whether
// this coordinator leads it.
func (e *journalEngine) partition(ctx context.Context) (fairway.Partition, bool, error) {
	st, err := e.leader.Status(ctx)
	if err != nil {
		return fairway.Partition{}, false, err
	}
	return fairway.Partition{
		Partition: int(st.Partition), Leader: st.Holder, Epoch: st.Epoch, LeaseLeftMS: st.Left.Milliseconds(),
		Database: databaseOf(e.db), Groups: st.Groups, Jobs: st.Jobs,
		UnpublishedRows: st.Unpublished, LagMS: st.Lag.Milliseconds(),
	}, st.Leading, nil
}

// databaseOf names a pool's database as host:port/name, without its
// credentials.
func databaseOf(pool *pgxpool.Pool) string {
	cc := pool.Config().ConnConfig
	return net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))) + "/" + cc.Database
}
