package partition_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/natsserver/natstest"
	"github.com/fairwayhq/fairway/internal/partition"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// TestOfAgreesWithNATS: a real nats-server's subject mapping with
// partition(n, group) sends each group's messages to the partition Of
// computes, for several counts and many group names.
func TestOfAgreesWithNATS(t *testing.T) {
	srv, nc := natstest.Start(t)
	groups := []string{"acme", "globex", "a", "tenant_17", "Tenant-17", "x-y-z", "émile"}
	for i := range 200 {
		groups = append(groups, fmt.Sprintf("group-%d", i))
	}
	for _, n := range []int{2, 3, 4, 7, 16} {
		prefix := fmt.Sprintf("p%d", n)
		from, to, err := partition.Mapping(prefix, "submit", n, 1)
		require.NoError(t, err)
		require.NoError(t, srv.GlobalAccount().AddMapping(from, to))
		ch := make(chan *nats.Msg, len(groups))
		sub, err := nc.ChanSubscribe(prefix+".part.>", ch)
		require.NoError(t, err)
		for _, g := range groups {
			require.NoError(t, nc.Publish(prefix+".submit."+g+".ocr", []byte(g)))
		}
		for range groups {
			select {
			case m := <-ch:
				g := string(m.Data)
				want := fmt.Sprintf("%s.part.%d.submit.%s.ocr", prefix, partition.Of(g, n), g)
				require.Equal(t, want, m.Subject, "group %q of %d partitions", g, n)
			case <-time.After(10 * time.Second):
				t.Fatalf("%d partitions: a message did not come", n)
			}
		}
		require.NoError(t, sub.Unsubscribe())
	}
}

func TestOfIsStableAndSpreads(t *testing.T) {
	require.Equal(t, 0, partition.Of("acme", 1))
	// Fixed values: a change of the hash would move every group.
	require.Equal(t, []int{partition.Of("acme", 4), partition.Of("globex", 4)}, []int{fnv4("acme"), fnv4("globex")})
	counts := make([]int, 8)
	for i := range 8000 {
		counts[partition.Of(fmt.Sprintf("tenant-%d", i), 8)]++
	}
	for p, c := range counts {
		require.InDelta(t, 1000, c, 150, "partition %d of 8: %v", p, counts)
	}
	for _, n := range []int{0, -3, partition.Max + 1} {
		require.ErrorContains(t, partition.Check(n), "a cluster has from 1 to 1024", "%d", n)
		require.Panics(t, func() { partition.Of("acme", n) })
		_, _, err := partition.Mapping("fairway", "submit", n, 1)
		require.Error(t, err)
	}
}

// fnv4 is FNV-1a 32 written out from its definition, modulo 4.
func fnv4(s string) int {
	h := uint32(2166136261)
	for _, b := range []byte(s) {
		h ^= uint32(b)
		h *= 16777619
	}
	return int(h % 4)
}

func TestMapping(t *testing.T) {
	from, to, err := partition.Mapping("fairway", "api", 4, 1)
	require.NoError(t, err)
	require.Equal(t, "fairway.api.*.*", from)
	require.Equal(t, "fairway.part.{{partition(4,1)}}.api.{{wildcard(1)}}.{{wildcard(2)}}", to)
	require.False(t, strings.HasPrefix(to, "fairway.api."), "a namespace of its own")
}
