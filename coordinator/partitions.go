package coordinator

import (
	"context"
	"fmt"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	istore "github.com/fairwayhq/fairway/internal/store"
	"github.com/google/uuid"
)

// checkOnePartition records, in a database that recorded no cluster
// yet, a cluster of one partition, and refuses a database whose cluster
// has more (recorded by 'fairway migrate --partitions'), or that holds
// partitions of a cluster whose home is another database: this
// version's coordinator leads a cluster of one partition, in its home
// database (istore.CheckLayout checks a whole layout).
func checkOnePartition(ctx context.Context, st *istore.Store) error {
	rec, err := st.RecordCluster(ctx, istore.Cluster{ID: uuid.NewString(), Partitions: 1, Home: true})
	switch {
	case err != nil:
		return err
	case !rec.Home:
		return fmt.Errorf("this database (%s) holds partitions of a cluster whose home is another database (cluster %s): give the coordinator that cluster's home database", st.Where(), rec.ID)
	case rec.Partitions != 1:
		return fmt.Errorf("this database's cluster (%s) was created with %d partitions: this version's coordinators lead a cluster of one partition; the coordinators that spread more over themselves are being built (docs/architecture.md, \"Partitions\")", st.Where(), rec.Partitions)
	}
	return nil
}

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
