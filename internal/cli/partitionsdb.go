package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/fairwayhq/fairway/internal/partition"
	istore "github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storeaccess"
	"github.com/fairwayhq/fairway/store"
)

// checkLayout checks the partitions' layout (database.partitions and
// database.partition-urls) against what its databases recorded, and
// records it in those that recorded none (istore.CheckLayout): home is
// database.url's store, migrated. The other databases are migrated here;
// out, when set, is told what each applied.
func (e *env) checkLayout(ctx context.Context, home *store.Store, out io.Writer) (istore.Cluster, error) {
	return istore.CheckLayout(ctx, storeaccess.Engine(home), e.cfg.Database.Layout(), istore.Options{Logger: e.log},
		func(db partition.Database, where string, applied []int) {
			switch {
			case out == nil && len(applied) > 0:
				e.log.Info("partition database migrated", "partitions", db.Partitions, "database", where, "versions", applied)
			case out == nil:
			case len(applied) == 0:
				fmt.Fprintf(out, "partitions %v's database %s is up to date\n", db.Partitions, where)
			default:
				fmt.Fprintf(out, "partitions %v's database %s: applied migrations %v\n", db.Partitions, where, applied)
			}
		})
}

// oneLeaderOnly refuses a layout of more than one partition before
// anything is recorded: this version's coordinator leads a cluster of
// one. 'fairway migrate' records more (a cluster is created with its
// count), for the coordinators that will lead them.
func oneLeaderOnly(layout partition.Layout) error {
	if layout.Count == 1 {
		return nil
	}
	return fmt.Errorf("database.partitions is %d: this version's coordinators lead a cluster of one partition; the coordinators that spread more over themselves are being built (docs/architecture.md, \"Partitions\"): set database.partitions to 1", layout.Count)
}
