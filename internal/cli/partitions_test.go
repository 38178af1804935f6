package cli_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

// TestPartitionsList: the one partition, led by the coordinator, its
// database, its groups and jobs as they are (three held), and its events
// caught up once they are published.
func TestPartitionsList(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	url := []string{"--nats-url", c.url}
	var ids []string
	for _, g := range []string{"acme", "globex", "acme"} {
		id, err := c.client.Submit(t.Context(), fairway.Submission{Group: g, Task: "echo", Pending: true})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for _, id := range ids {
		c.await(t, id, fairway.StatePending)
	}
	row := regexp.MustCompile(`(?m)^0\s+(\S+)\s+(\d+)\s+([0-9.]+m?s) left\s+(\S+)\s+2\s+0\s+0\s+3\s+none$`)
	var out string
	require.Eventually(t, func() bool {
		code, o, errOut := run(t, append([]string{"partitions", "list"}, url...)...)
		require.Equal(t, 0, code, errOut)
		out = o
		return row.MatchString(out)
	}, 10*time.Second, 50*time.Millisecond, "the partition with 2 groups, 3 jobs held, events caught up")
	require.Contains(t, out, "PARTITION  LEADER")
	m := row.FindStringSubmatch(out)
	require.NotEmpty(t, m[1], "the leader")
	require.NotEqual(t, "0", m[2], "the epoch of a lease taken")
	t.Logf("%s", out)
	require.Regexp(t, `^127\.0\.0\.1:\d+/\S+$|^/\S+/\S+$`, m[4], "the database, host:port/name, no credentials")
	require.NotContains(t, out, "password")

	code, _, errOut := run(t, append([]string{"partitions", "list", "extra"}, url...)...)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown command "extra"`)
}
