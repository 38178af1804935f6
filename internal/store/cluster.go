package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/record_cluster.sql
	recordClusterSQL string
	//go:embed sql/journal_partitions.sql
	journalPartitionsSQL string
	//go:embed sql/record_here.sql
	recordHereSQL string
)

// Cluster is what a database recorded of the cluster it belongs to
// (migration 031): the cluster's id and partition count, fixed when it
// was created, and whether it is the cluster's home database
// (database.url) rather than one of the partitions map's.
type Cluster struct {
	ID         string
	Partitions int
	Home       bool
	Chosen     time.Time
	// Here are the partitions whose journal is in this database, as the
	// last start recorded them.
	Here []int
}

// RecordCluster records c as the database's cluster unless it recorded
// one already (its first coordinator's start, or 'fairway migrate'), and
// returns the one recorded: the caller compares.
func (s *Store) RecordCluster(ctx context.Context, c Cluster) (Cluster, error) {
	var got Cluster
	var err error
	// Twice at most: a coordinator recording at the same moment commits
	// its row after this statement's snapshot, which then finds none.
	for range 2 {
		err = s.pool.QueryRow(ctx, recordClusterSQL, c.ID, c.Partitions, c.Home).Scan(&got.ID, &got.Partitions, &got.Home, &got.Chosen)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	if err != nil {
		return Cluster{}, fmt.Errorf("recording the database's cluster: %w", interpretError(err))
	}
	return got, nil
}

// JournalPartitions are the partitions whose journal lives in this
// database: rows, a lease or a snapshot of theirs are here.
func (s *Store) JournalPartitions(ctx context.Context) ([]int, error) {
	rows, err := s.pool.Query(ctx, journalPartitionsSQL)
	if err != nil {
		return nil, fmt.Errorf("reading the partitions of the database's journal: %w", interpretError(err))
	}
	parts, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("reading the partitions of the database's journal: %w", interpretError(err))
	}
	return parts, nil
}

// OpenLayout opens the databases of layout, each once, and migrates
// them (migrated, when set, is told what each applied, the home's
// included): home is the home database's store (database.url), parts
// each partition's store (several may be the same, home among them).
// closeAll closes them all. Nothing is recorded: RecordLayout does.
func OpenLayout(ctx context.Context, layout partition.Layout, opts Options, migrated func(db partition.Database, where string, applied []int)) (home *Store, parts []*Store, closeAll func(), err error) {
	if err := layout.Check(); err != nil {
		return nil, nil, nil, err
	}
	var opened []*Store
	closeAll = func() {
		for _, st := range opened {
			st.Close()
		}
	}
	parts = make([]*Store, layout.Count)
	for _, db := range layout.Databases() {
		what := "database.url's database"
		if !db.Home {
			what = partitionList(db.Partitions) + "'s database"
		}
		st, err := Open(ctx, db.URL, opts)
		if err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("%s: %w", what, err)
		}
		opened = append(opened, st)
		applied, err := st.Migrate(ctx)
		if err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("%s (%s): %w", what, st.Where(), err)
		}
		if migrated != nil {
			migrated(db, st.Where(), applied)
		}
		if db.Home {
			home = st
		}
		for _, p := range db.Partitions {
			parts[p] = st
		}
	}
	return home, parts, closeAll, nil
}

// RecordLayout checks where the partitions are (parts[p] is partition
// p's database, home the cluster's home, migrated) against what the
// databases recorded, and records it in those that recorded nothing yet:
// the home database a new cluster of len(parts) partitions, each other
// database the home's cluster; and each database the partitions it holds
// (Cluster's Here, for store.InsertTx). It refuses a count other than the
// one the cluster was created with, a database of another cluster, and a
// partition whose journal is in another database than parts says (moved
// without moving its journal). It returns the home's record.
func RecordLayout(ctx context.Context, home *Store, parts []*Store) (Cluster, error) {
	if err := partition.Check(len(parts)); err != nil {
		return Cluster{}, err
	}
	rec, err := home.RecordCluster(ctx, Cluster{ID: uuid.NewString(), Partitions: len(parts), Home: true})
	if err != nil {
		return Cluster{}, err
	}
	switch {
	case !rec.Home:
		return Cluster{}, fmt.Errorf("database.url (%s) holds partitions of a cluster whose home is another database (cluster %s of %s): point database.url at that cluster's home database, and this one in database.partition-urls",
			home.Where(), rec.ID, count(rec.Partitions))
	case rec.Partitions != len(parts):
		return Cluster{}, fmt.Errorf("database.partitions is %d, but this cluster was created with %s (recorded in %s on %s): a group's partition is a hash of its name modulo the count, so the count never changes; set database.partitions to %d",
			len(parts), count(rec.Partitions), home.Where(), rec.Chosen.UTC().Format(time.DateOnly), rec.Partitions)
	}
	stores := []*Store{home}
	held := map[*Store][]int{home: {}}
	for p, st := range parts {
		if _, ok := held[st]; !ok {
			stores = append(stores, st)
		}
		held[st] = append(held[st], p)
	}
	for _, st := range stores[1:] {
		got, err := st.RecordCluster(ctx, Cluster{ID: rec.ID, Partitions: rec.Partitions, Home: false})
		if err != nil {
			return Cluster{}, err
		}
		switch {
		case got.ID != rec.ID:
			return Cluster{}, fmt.Errorf("%s's database (%s) belongs to another cluster (%s, created %s with %s; this one is %s): name a database of this cluster in database.partition-urls, or a new one",
				partitionList(held[st]), st.Where(), got.ID, got.Chosen.UTC().Format(time.DateOnly), count(got.Partitions), rec.ID)
		case got.Home:
			return Cluster{}, fmt.Errorf("%s's database (%s) is this cluster's home database, named by another URL than database.url: leave %s out of database.partition-urls",
				partitionList(held[st]), st.Where(), partitionList(held[st]))
		}
	}
	for _, st := range stores {
		if err := checkJournals(ctx, st, held[st], parts); err != nil {
			return Cluster{}, err
		}
		if _, err := st.pool.Exec(ctx, recordHereSQL, held[st]); err != nil {
			return Cluster{}, fmt.Errorf("recording the partitions of %s: %w", st.Where(), interpretError(err))
		}
	}
	return rec, nil
}

// checkJournals refuses a database that holds the journal of a partition
// parts puts elsewhere (here are the partitions it holds).
func checkJournals(ctx context.Context, st *Store, here []int, parts []*Store) error {
	found, err := st.JournalPartitions(ctx)
	if err != nil {
		return err
	}
	for _, p := range found {
		if slices.Contains(here, p) {
			continue
		}
		where := fmt.Sprintf("no database: the cluster has %s", count(len(parts)))
		if p < len(parts) {
			where = parts[p].Where()
		}
		return fmt.Errorf("partition %d's journal is in %s, but the configuration puts the partition in %s: a partition's database moves with its journal (docs/operations.md, \"Partitions\"); give database.partition-urls its database back, or move the journal first",
			p, st.Where(), where)
	}
	return nil
}

// partitionList names partitions: "partition 2", "partitions 1, 3".
func partitionList(parts []int) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = strconv.Itoa(p)
	}
	if len(parts) == 1 {
		return "partition " + s[0]
	}
	return "partitions " + strings.Join(s, ", ")
}

// count says how many partitions: "1 partition", "4 partitions".
func count(n int) string {
	if n == 1 {
		return "1 partition"
	}
	return strconv.Itoa(n) + " partitions"
}
