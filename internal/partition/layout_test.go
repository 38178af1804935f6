package partition_test

import (
	"testing"

	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/stretchr/testify/require"
)

// TestLayoutDatabases: the home database first, holding the partitions
// the map does not name; a database named for several partitions is one.
func TestLayoutDatabases(t *testing.T) {
	l := partition.Layout{Count: 5, Home: "postgres://a/f", URLs: map[int]string{1: "postgres://b/f", 4: "postgres://b/f", 2: "postgres://c/f"}}
	require.NoError(t, l.Check())
	require.Equal(t, []partition.Database{
		{URL: "postgres://a/f", Home: true, Partitions: []int{0, 3}},
		{URL: "postgres://b/f", Partitions: []int{1, 4}},
		{URL: "postgres://c/f", Partitions: []int{2}},
	}, l.Databases())
	require.Equal(t, "postgres://b/f", l.URL(4))
	require.Equal(t, "postgres://a/f", l.URL(3))

	all := partition.Layout{Count: 2, Home: "postgres://a/f", URLs: map[int]string{0: "postgres://b/f", 1: "postgres://b/f"}}
	require.Equal(t, []partition.Database{{URL: "postgres://a/f", Home: true}, {URL: "postgres://b/f", Partitions: []int{0, 1}}}, all.Databases(),
		"the home database holds the cluster's own tables even with no partition")

	require.ErrorContains(t, partition.Layout{Count: 2, URLs: map[int]string{2: "postgres://b/f"}}.Check(), "partition 2 has a database, but the cluster's 2 partitions are numbered 0 to 1")
	require.ErrorContains(t, partition.Layout{Count: 0}.Check(), "0 partitions")
}

// TestParseURLs reads what FormatURLs writes, and says what is wrong
// with what it cannot read, a password masked.
func TestParseURLs(t *testing.T) {
	urls, err := partition.ParseURLs(" 3=postgres://u:pw@c:5432/f?sslmode=require\n1=postgresql://b/f ")
	require.NoError(t, err)
	require.Equal(t, map[int]string{1: "postgresql://b/f", 3: "postgres://u:pw@c:5432/f?sslmode=require"}, urls)
	require.Equal(t, "1=postgresql://b/f 3=postgres://u:pw@c:5432/f?sslmode=require", partition.FormatURLs(urls))
	empty, err := partition.ParseURLs("")
	require.NoError(t, err)
	require.Empty(t, empty)

	for in, want := range map[string]string{
		"postgres://u:pw@b/f":               `"postgres://u:****@b/f" is not P=URL`,
		"-1=postgres://b/f":                 `the partition "-1" is not a number from 0 to 1023`,
		"1024=postgres://b/f":               `the partition "1024" is not a number from 0 to 1023`,
		"1=mysql://u:pw@b/f":                `partition 1: "mysql://u:****@b/f" is not a postgres:// URL`,
		"1=dbname=f":                        `partition 1: "dbname=f" is not a postgres:// URL`,
		"1=postgres://b/f 1=postgres://c/f": "partition 1 is named twice",
	} {
		_, err := partition.ParseURLs(in)
		require.ErrorContains(t, err, want, in)
		require.NotContains(t, err.Error(), "pw", in)
	}
}
