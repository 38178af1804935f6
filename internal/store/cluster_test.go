package store_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestCheckLayoutRecordsTheClusterInEachDatabase: the home database
// records a new cluster with the layout's count, each other database
// the same cluster (not as its home), and checking again changes
// nothing.
func TestCheckLayoutRecordsTheClusterInEachDatabase(t *testing.T) {
	t.Parallel()
	home, homeURL := storetest.OpenURL(t)
	b, bURL := storetest.OpenURL(t)
	c, cURL := storetest.OpenURL(t)
	layout := partition.Layout{Count: 4, Home: homeURL, URLs: map[int]string{1: bURL, 3: bURL, 2: cURL}}
	var told []partition.Database
	rec, err := checkLayout(t, layout, func(db partition.Database, _ string, _ []int) {
		if !db.Home {
			told = append(told, db)
		}
	})
	require.NoError(t, err)
	require.Equal(t, 4, rec.Partitions)
	require.True(t, rec.Home)
	require.Equal(t, []partition.Database{{URL: bURL, Partitions: []int{1, 3}}, {URL: cURL, Partitions: []int{2}}}, told, "the others, migrated")
	for _, st := range []*store.Store{b, c} {
		got, err := st.RecordCluster(t.Context(), store.Cluster{ID: "another", Partitions: 9})
		require.NoError(t, err)
		require.Equal(t, rec.ID, got.ID, "recorded as one of the home's cluster")
		require.Equal(t, 4, got.Partitions)
		require.False(t, got.Home)
	}
	here := func(st *store.Store) []int {
		var h []int
		require.NoError(t, st.Pool().QueryRow(t.Context(), `SELECT here FROM fairway_cluster`).Scan(&h))
		return h
	}
	require.Equal(t, []int{0}, here(home), "each database records the partitions it holds, for InsertTx")
	require.Equal(t, []int{1, 3}, here(b))
	require.Equal(t, []int{2}, here(c))
	again, err := checkLayout(t, layout, nil)
	require.NoError(t, err)
	require.Equal(t, rec.ID, again.ID)
	require.Equal(t, rec.Chosen, again.Chosen)
}

// TestCheckLayoutRefusesWhatWouldMoveGroups: a count other than the one
// the cluster was created with, a database of another cluster, a
// partition's database named as a cluster's home, and a partition whose
// journal is in another database than the layout says.
func TestCheckLayoutRefusesWhatWouldMoveGroups(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	home, homeURL := storetest.OpenURL(t)
	b, bURL := storetest.OpenURL(t)
	_, err := checkLayout(t, partition.Layout{Count: 4, Home: homeURL, URLs: map[int]string{3: bURL}}, nil)
	require.NoError(t, err)

	_, err = checkLayout(t, partition.Layout{Count: 2, Home: homeURL}, nil)
	require.ErrorContains(t, err, "database.partitions is 2, but this cluster was created with 4 partitions")
	require.ErrorContains(t, err, "set database.partitions to 4")

	other, otherURL := storetest.OpenURL(t)
	_, err = checkLayout(t, partition.Layout{Count: 1, Home: otherURL}, nil)
	require.NoError(t, err)
	_, err = checkLayout(t, partition.Layout{Count: 4, Home: homeURL, URLs: map[int]string{3: otherURL}}, nil)
	require.ErrorContains(t, err, "partition 3's database ("+other.Where()+") belongs to another cluster")

	_, err = checkLayout(t, partition.Layout{Count: 4, Home: bURL}, nil)
	require.ErrorContains(t, err, "database.url ("+b.Where()+") holds partitions of a cluster whose home is another database")

	// Partition 3's journal is in b; a configuration that forgets b puts
	// it in the home database.
	_, err = b.Pool().Exec(ctx, `INSERT INTO fairway_journal_lease (partition, holder, epoch, until) VALUES (3, 'c1', 1, now())`)
	require.NoError(t, err)
	_, err = checkLayout(t, partition.Layout{Count: 4, Home: homeURL, URLs: map[int]string{3: bURL}}, nil)
	require.NoError(t, err)
	_, err = checkLayout(t, partition.Layout{Count: 4, Home: homeURL, URLs: map[int]string{2: bURL}}, nil)
	require.ErrorContains(t, err, "partition 3's journal is in "+b.Where()+", but the configuration puts the partition in "+home.Where())
	// And partition 0's rows in the home database, the map sending it away.
	_, err = home.Pool().Exec(ctx, `INSERT INTO fairway_journal (partition, kind, body) VALUES (0, 'submitted', '\x00')`)
	require.NoError(t, err)
	_, err = checkLayout(t, partition.Layout{Count: 4, Home: homeURL, URLs: map[int]string{0: bURL, 3: bURL}}, nil)
	require.ErrorContains(t, err, "partition 0's journal is in "+home.Where()+", but the configuration puts the partition in "+b.Where())
}

// TestADatabaseWithJobsWasCreatedWithOnePartition: migration 031 records
// one partition in a database that holds jobs from before it, so that a
// count configured later is refused rather than moving every group.
func TestADatabaseWithJobsWasCreatedWithOnePartition(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mig, err := os.ReadFile("migrations/031_cluster.sql")
	require.NoError(t, err)
	_, backfill, ok := strings.Cut(string(mig), "-- A database that holds jobs already was created with one partition.")
	require.True(t, ok)

	empty, emptyURL := storetest.OpenURL(t)
	_, err = empty.Pool().Exec(ctx, backfill)
	require.NoError(t, err)
	rec, err := checkLayout(t, partition.Layout{Count: 8, Home: emptyURL}, nil)
	require.NoError(t, err, "an empty database is a new cluster")
	require.Equal(t, 8, rec.Partitions)

	used, usedURL := storetest.OpenURL(t)
	_, err = used.Pool().Exec(ctx, `INSERT INTO fairway_journal (partition, kind, body) VALUES (0, 'submitted', '\x00')`)
	require.NoError(t, err)
	_, err = used.Pool().Exec(ctx, backfill)
	require.NoError(t, err)
	_, err = checkLayout(t, partition.Layout{Count: 8, Home: usedURL}, nil)
	require.ErrorContains(t, err, "database.partitions is 8, but this cluster was created with 1 partition (")
}

// checkLayout opens, migrates and records layout as a coordinator's
// start does (store.OpenLayout, store.RecordLayout).
func checkLayout(t *testing.T, layout partition.Layout, migrated func(partition.Database, string, []int)) (store.Cluster, error) {
	t.Helper()
	home, parts, closeAll, err := store.OpenLayout(t.Context(), layout, store.Options{}, migrated)
	if err != nil {
		return store.Cluster{}, err
	}
	defer closeAll()
	return store.RecordLayout(t.Context(), home, parts)
}

// TestInsertTxStoresInTheGroupsPartition: store.InsertTx appends each
// group's jobs to its partition's journal, and refuses a group whose
// partition is in another database than the transaction's.
func TestInsertTxStoresInTheGroupsPartition(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	home, homeURL := storetest.OpenURL(t)
	_, bURL := storetest.OpenURL(t)
	_, err := checkLayout(t, partition.Layout{Count: 4, Home: homeURL, URLs: map[int]string{3: bURL}}, nil)
	require.NoError(t, err)
	groups := map[int]string{}
	for i := 0; len(groups) < 4; i++ {
		g := fmt.Sprintf("g%d", i)
		if _, ok := groups[partition.Of(g, 4)]; !ok {
			groups[partition.Of(g, 4)] = g
		}
	}
	insert := func(groups ...string) error {
		tx, err := home.Pool().Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		var subs []fairway.Submission
		for _, g := range groups {
			subs = append(subs, fairway.Submission{Group: g, Task: "t"})
		}
		if _, err := store.InsertTx(ctx, tx, store.TxOptions{}, subs...); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	require.NoError(t, insert(groups[0], groups[1], groups[2], groups[1]))
	rows, err := home.Pool().Query(ctx, `SELECT partition, count(*) FROM fairway_journal GROUP BY partition ORDER BY partition`)
	require.NoError(t, err)
	type count struct{ P, N int }
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[count])
	require.NoError(t, err)
	require.Equal(t, []count{{0, 1}, {1, 1}, {2, 1}}, got, "one row a partition, in each group's")
	err = insert(groups[0], groups[3])
	require.ErrorContains(t, err, fmt.Sprintf("submission 1: group: %q is in partition 3, whose journal is in another database than this transaction's", groups[3]))
}
