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
	"github.com/fairwayhq/fairway/internal/secret"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/record_cluster.sql
	recordClusterSQL string
	//go:embed sql/journal_partitions.sql
	journalPartitionsSQL string
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

// CheckLayout checks where the configuration puts the partitions
// against what the databases recorded, and records it in those that
// recorded nothing yet: the home database (home, migrated by the caller)
// records a new cluster with the layout's count, each other database of
// the layout (opened and migrated here, then closed; migrated is told
// what each applied) the home's cluster. It refuses a count other than
// the one the cluster was created with, a database of another cluster,
// and a partition whose journal is in another database than the layout
// says (moved without moving its journal). It returns the home's record.
func CheckLayout(ctx context.Context, home *Store, layout partition.Layout, opts Options, migrated func(db partition.Database, where string, applied []int)) (Cluster, error) {
	if err := layout.Check(); err != nil {
		return Cluster{}, err
	}
	dbs := layout.Databases()
	rec, err := home.RecordCluster(ctx, Cluster{ID: uuid.NewString(), Partitions: layout.Count, Home: true})
	if err != nil {
		return Cluster{}, err
	}
	switch {
	case !rec.Home:
		return Cluster{}, fmt.Errorf("database.url (%s) holds partitions of a cluster whose home is another database (cluster %s of %s): point database.url at that cluster's home database, and this one in database.partition-urls",
			home.Where(), rec.ID, count(rec.Partitions))
	case rec.Partitions != layout.Count:
		return Cluster{}, fmt.Errorf("database.partitions is %d, but this cluster was created with %s (recorded in %s on %s): a group's partition is a hash of its name modulo the count, so the count never changes; set database.partitions to %d",
			layout.Count, count(rec.Partitions), home.Where(), rec.Chosen.UTC().Format(time.DateOnly), rec.Partitions)
	}
	if err := checkJournals(ctx, home, dbs[0], layout); err != nil {
		return Cluster{}, err
	}
	for _, db := range dbs[1:] {
		if err := joinCluster(ctx, db, rec, layout, opts, migrated); err != nil {
			return Cluster{}, err
		}
	}
	return rec, nil
}

// joinCluster opens, migrates and checks db, a database of the layout
// other than the home one, recording it as one of cluster rec's.
func joinCluster(ctx context.Context, db partition.Database, rec Cluster, layout partition.Layout, opts Options, migrated func(partition.Database, string, []int)) error {
	st, err := Open(ctx, db.URL, opts)
	if err != nil {
		return fmt.Errorf("%s's database: %w", partitionList(db.Partitions), err)
	}
	defer st.Close()
	applied, err := st.Migrate(ctx)
	if err != nil {
		return fmt.Errorf("%s's database (%s): %w", partitionList(db.Partitions), st.Where(), err)
	}
	if migrated != nil {
		migrated(db, st.Where(), applied)
	}
	got, err := st.RecordCluster(ctx, Cluster{ID: rec.ID, Partitions: rec.Partitions, Home: false})
	if err != nil {
		return err
	}
	switch {
	case got.ID != rec.ID:
		return fmt.Errorf("%s's database (%s) belongs to another cluster (%s, created %s with %s; this one is %s): name a database of this cluster in database.partition-urls, or a new one",
			partitionList(db.Partitions), st.Where(), got.ID, got.Chosen.UTC().Format(time.DateOnly), count(got.Partitions), rec.ID)
	case got.Home:
		return fmt.Errorf("%s's database (%s) is this cluster's home database, named by another URL than database.url: leave %s out of database.partition-urls",
			partitionList(db.Partitions), st.Where(), partitionList(db.Partitions))
	}
	return checkJournals(ctx, st, db, layout)
}

// checkJournals refuses a database that holds the journal of a partition
// the layout puts elsewhere.
func checkJournals(ctx context.Context, st *Store, db partition.Database, layout partition.Layout) error {
	parts, err := st.JournalPartitions(ctx)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if !slices.Contains(db.Partitions, p) {
			where := "database.url's database"
			if u, ok := layout.URLs[p]; ok {
				where = secret.Mask(u)
			}
			if p >= layout.Count {
				where = fmt.Sprintf("no database: the cluster has %d partitions", layout.Count)
			}
			return fmt.Errorf("partition %d's journal is in %s, but the configuration puts the partition in %s: a partition's database moves with its journal (docs/operations.md, \"Partitions\"); give database.partition-urls its database back, or move the journal first",
				p, st.Where(), where)
		}
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
