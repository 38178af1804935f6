package cli

import (
	"context"
	"fmt"

	"github.com/fairwayhq/fairway/internal/partition"
	istore "github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storeaccess"
	"github.com/fairwayhq/fairway/store"
)

// openLayout opens and migrates the databases of the partitions' layout
// (database.url, database.partitions, database.partition-urls: each once,
// istore.OpenLayout): home is database.url's, parts each partition's, for
// the coordinator, which checks and records the layout at its start
// (istore.RecordLayout). What each database applied is logged; with out
// set, printed there instead (the home database's is not: the caller
// says it).
func (e *env) openLayout(ctx context.Context, out func(db partition.Database, where string, applied []int)) (home *store.Store, parts []*store.Store, closeAll func(), err error) {
	if out == nil {
		out = func(db partition.Database, where string, applied []int) {
			if len(applied) > 0 {
				e.log.Info("database migrated", "partitions", db.Partitions, "home", db.Home, "database", where, "versions", applied)
			}
		}
	}
	h, ps, closeAll, err := istore.OpenLayout(ctx, e.cfg.Database.Layout(), istore.Options{Logger: e.log}, out)
	if err != nil {
		return nil, nil, nil, err
	}
	parts = make([]*store.Store, len(ps))
	for p, st := range ps {
		parts[p] = storeaccess.Public(st).(*store.Store)
	}
	return storeaccess.Public(h).(*store.Store), parts, closeAll, nil
}

// recordLayout is 'fairway migrate”s part for the partitions: the
// databases of the partitions map migrated (said on stdout), and the
// layout checked and recorded in each (istore.RecordLayout).
func (e *env) recordLayout(ctx context.Context) (istore.Cluster, error) {
	home, parts, closeAll, err := e.openLayout(ctx, func(db partition.Database, where string, applied []int) {
		switch {
		case db.Home:
		case len(applied) == 0:
			fmt.Fprintf(e.stdout, "partitions %v's database %s is up to date\n", db.Partitions, where)
		default:
			fmt.Fprintf(e.stdout, "partitions %v's database %s: applied migrations %v\n", db.Partitions, where, applied)
		}
	})
	if err != nil {
		return istore.Cluster{}, err
	}
	defer closeAll()
	engines := make([]*istore.Store, len(parts))
	for p, st := range parts {
		engines[p] = storeaccess.Engine(st)
	}
	return istore.RecordLayout(ctx, storeaccess.Engine(home), engines)
}
