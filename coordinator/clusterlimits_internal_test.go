package coordinator

import (
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	istore "github.com/fairwayhq/fairway/internal/store"
	"github.com/stretchr/testify/require"
)

// TestClusterLimitsSplitWhatIsLeft: over three partitions, a task's limit
// of one goes to one partition asked, and while that claim is in flight
// none is left for another request; released, the next request's goes to
// another partition (the turn rotates among partitions asked alike). A
// limit of five over partitions asked 4, 2 and 0 jobs goes 3 and 2 by
// the largest remainders; an executor's cap of a request is split the
// same, reserving nothing; tasks bound by neither get no cap.
func TestClusterLimitsSplitWhatIsLeft(t *testing.T) {
	parts := make(partitions, 3)
	for i := range parts {
		parts[i] = &journalEngine{leader: journal.NewLeader(nil, journal.LeaderConfig{Partition: int16(i)})}
	}
	c := newClusterLimits(parts, nil)
	require.Nil(t, newClusterLimits(parts[:1], nil), "one partition counts its own")
	limits := []fairway.Limit{{Kind: "task", Name: "t", Max: 1}, {Kind: "task", Name: "other", Max: 0}, {Kind: "group", Name: "t", Max: 0}}
	p := istore.ClaimParams{Tasks: []string{"t", "free"}}
	sum := func(caps []map[string]int, task string) (n int, at int) {
		at = -1
		for i, m := range caps {
			n += m[task]
			if m[task] > 0 {
				at = i
			}
			require.NotContains(t, m, "free", "a task bound by nothing gets no cap")
		}
		return n, at
	}

	caps, release := c.split(limits, p, []int{3, 3, 3}, true)
	n, first := sum(caps, "t")
	require.Equal(t, 1, n)
	again, release2 := c.split(limits, p, []int{3, 3, 3}, true)
	n, _ = sum(again, "t")
	require.Zero(t, n, "the first claim's job is reserved while it is in flight")
	release(nil)
	release2(nil)
	require.Empty(t, c.inflight)
	caps, release = c.split(limits, p, []int{3, 3, 3}, true)
	n, second := sum(caps, "t")
	require.Equal(t, 1, n)
	require.NotEqual(t, first, second, "the turn goes to another partition")
	release(nil)

	limits[0].Max = 5
	caps, release = c.split(limits, p, []int{4, 2, 0}, true)
	require.Equal(t, 3, caps[0]["t"])
	require.Equal(t, 2, caps[1]["t"])
	require.Nil(t, caps[2], "a partition not asked")
	require.Equal(t, 5, c.inflight["t"])
	release(nil)

	p = istore.ClaimParams{Tasks: []string{"u"}, TaskLimits: map[string]int{"u": 2}}
	caps, release = c.split(nil, p, []int{1, 1, 1}, true)
	n, _ = sum(caps, "u")
	require.Equal(t, 2, n, "the request's cap of two over three partitions")
	require.Empty(t, c.inflight, "a request's own cap reserves nothing over the cluster")
	release(nil)
	caps, _ = c.split(nil, istore.ClaimParams{Tasks: []string{"free"}}, []int{1, 1, 1}, true)
	require.Nil(t, caps)
}
