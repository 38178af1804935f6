package cli

import (
	"bytes"
	"testing"

	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

// TestShowPartitionsSaysWhoLeads: a lease held, one never taken, one
// given up, one run out with its holder (dead, or standing still), and
// the events' lag.
func TestShowPartitionsSaysWhoLeads(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, showPartitions(&out, []fairway.Partition{
		{Partition: 0, Leader: "c1", Epoch: 3, LeaseLeftMS: 1400, Database: "db:5432/f", Groups: 2,
			Jobs: map[fairway.State]int{fairway.StateWaiting: 5, fairway.StateStuck: 1, fairway.StateRunning: 2, fairway.StateScheduled: 1, fairway.StatePending: 4}},
		{Partition: 1, Database: "db:5432/f"},
		{Partition: 2, Epoch: 7, LeaseLeftMS: -300, Database: "db:5432/f"},
		{Partition: 3, Leader: "c9", Epoch: 2, LeaseLeftMS: -5000, Database: "db:5432/f", UnpublishedRows: 12, LagMS: 4200},
	}))
	require.Regexp(t, `(?m)^0\s+c1\s+3\s+1.4s left\s+db:5432/f\s+2\s+6\s+3\s+4\s+none$`, out.String())
	require.Regexp(t, `(?m)^1\s+\(none yet\)\s+0\s+-\s+`, out.String())
	require.Regexp(t, `(?m)^2\s+\(none: given up\)\s+7\s+-\s+`, out.String())
	require.Regexp(t, `(?m)^3\s+c9\s+2\s+ran out 5s ago\s+.*12 rows, 4.2s$`, out.String())
}
