package coordinator

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/stretchr/testify/require"
)

// errUnreachableForTest is the error the tests' leaders take for
// unreachability (journal.LeaderConfig.Unreachable).
var errUnreachableForTest = errors.New("test: unreachable")

// TestUnsureKeepsFailedClaimsFirst: an instance keeps maxUnsure claim ids
// a partition; once full, an unled request's id is not kept, and a
// failed claim's takes the place of the oldest unled one (a failed claim
// may have committed; an unled partition only perhaps saw an earlier
// try), so a long outage's unled requests do not crowd out the claim
// that took jobs.
func TestUnsureKeepsFailedClaimsFirst(t *testing.T) {
	var is instanceSpread
	for i := range maxUnsure {
		is.markUnsure(1, fmt.Sprint("unled-", i), false)
	}
	is.markUnsure(1, "unled-late", false)
	is.markUnsure(1, "failed", true)
	is.markUnsure(1, "unled-3", true) // an id seen unled, then failed
	ids := map[string]bool{}
	for _, u := range is.unsure[1] {
		ids[u.id] = u.failed
	}
	require.Len(t, is.unsure[1], maxUnsure)
	require.NotContains(t, ids, "unled-late")
	require.NotContains(t, ids, "unled-0", "the oldest unled id made room")
	require.True(t, ids["failed"])
	require.True(t, ids["unled-3"])
	for i := range maxUnsure {
		is.markUnsure(1, fmt.Sprint("failed-", i), true)
	}
	failed := 0
	for _, u := range is.unsure[1] {
		if u.failed {
			failed++
		}
	}
	require.Equal(t, maxUnsure, failed, "failed ids replace the unled ones, not each other")
	require.Empty(t, is.unsure[0])
}

// TestAnsweredPartitionsForgetTheClaimID: answering a request, the
// partitions whose leader answered it forget its id (they handed out all
// it claimed there: kept, it handed them out again later, and an
// executor that had run them ran them twice); those this coordinator
// does not serve keep it; one it serves that was not asked keeps none.
func TestAnsweredPartitionsForgetTheClaimID(t *testing.T) {
	parts := make(partitions, 4)
	for i := range parts {
		parts[i] = &journalEngine{leader: journal.NewLeader(nil, journal.LeaderConfig{Partition: int16(i),
			Unreachable: func(err error) bool { return errors.Is(err, errUnreachableForTest) }})}
	}
	parts[0].leads.Store(true)
	parts[1].leads.Store(true)
	parts[3].leads.Store(true)
	parts[3].leader.Observe(errUnreachableForTest) // led, its database unreachable: not served
	d := &dispatcher{parts: parts}
	var is instanceSpread
	is.markUnsure(1, "x", true)
	is.markUnserved(d, "x", []bool{false, true, false, false})
	require.Empty(t, is.unsure[0], "served, not asked")
	require.Empty(t, is.unsure[1], "answered: forgotten")
	require.Equal(t, []unsureClaim{{"x", false}}, is.unsure[2], "not led")
	require.Equal(t, []unsureClaim{{"x", false}}, is.unsure[3], "its database unreachable")
}
