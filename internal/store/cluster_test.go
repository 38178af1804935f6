package store_test

import (
	"os"
	"strings"
	"testing"

	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storetest"
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
	rec, err := store.CheckLayout(t.Context(), home, layout, store.Options{}, func(db partition.Database, _ string, _ []int) { told = append(told, db) })
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
	again, err := store.CheckLayout(t.Context(), home, layout, store.Options{}, nil)
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
	_, err := store.CheckLayout(ctx, home, partition.Layout{Count: 4, Home: homeURL, URLs: map[int]string{3: bURL}}, store.Options{}, nil)
	require.NoError(t, err)

	_, err = store.CheckLayout(ctx, home, partition.Layout{Count: 2, Home: homeURL}, store.Options{}, nil)
	require.ErrorContains(t, err, "database.partitions is 2, but this cluster was created with 4 partitions")
	require.ErrorContains(t, err, "set database.partitions to 4")

	other, otherURL := storetest.OpenURL(t)
	_, err = store.CheckLayout(ctx, other, partition.Layout{Count: 1, Home: otherURL}, store.Options{}, nil)
	require.NoError(t, err)
	_, err = store.CheckLayout(ctx, home, partition.Layout{Count: 4, Home: homeURL, URLs: map[int]string{3: otherURL}}, store.Options{}, nil)
	require.ErrorContains(t, err, "partition 3's database ("+other.Where()+") belongs to another cluster")

	_, err = store.CheckLayout(ctx, b, partition.Layout{Count: 4, Home: bURL}, store.Options{}, nil)
	require.ErrorContains(t, err, "database.url ("+b.Where()+") holds partitions of a cluster whose home is another database")

	// Partition 3's journal is in b; a configuration that forgets b puts
	// it in the home database.
	_, err = b.Pool().Exec(ctx, `INSERT INTO fairway_journal_lease (partition, holder, epoch, until) VALUES (3, 'c1', 1, now())`)
	require.NoError(t, err)
	_, err = store.CheckLayout(ctx, home, partition.Layout{Count: 4, Home: homeURL, URLs: map[int]string{3: bURL}}, store.Options{}, nil)
	require.NoError(t, err)
	_, err = store.CheckLayout(ctx, home, partition.Layout{Count: 4, Home: homeURL, URLs: map[int]string{2: bURL}}, store.Options{}, nil)
	require.ErrorContains(t, err, "partition 3's journal is in "+b.Where()+", but the configuration puts the partition in database.url's database")
	// And partition 0's rows in the home database, the map sending it away.
	_, err = home.Pool().Exec(ctx, `INSERT INTO fairway_journal (partition, kind, body) VALUES (0, 'submitted', '\x00')`)
	require.NoError(t, err)
	_, err = store.CheckLayout(ctx, home, partition.Layout{Count: 4, Home: homeURL, URLs: map[int]string{0: bURL, 3: bURL}}, store.Options{}, nil)
	require.ErrorContains(t, err, "partition 0's journal is in "+home.Where()+", but the configuration puts the partition in postgres://")
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
	rec, err := store.CheckLayout(ctx, empty, partition.Layout{Count: 8, Home: emptyURL}, store.Options{}, nil)
	require.NoError(t, err, "an empty database is a new cluster")
	require.Equal(t, 8, rec.Partitions)

	used, usedURL := storetest.OpenURL(t)
	_, err = used.Pool().Exec(ctx, `INSERT INTO fairway_journal (partition, kind, body) VALUES (0, 'submitted', '\x00')`)
	require.NoError(t, err)
	_, err = used.Pool().Exec(ctx, backfill)
	require.NoError(t, err)
	_, err = store.CheckLayout(ctx, used, partition.Layout{Count: 8, Home: usedURL}, store.Options{}, nil)
	require.ErrorContains(t, err, "database.partitions is 8, but this cluster was created with 1 partition (")
}
