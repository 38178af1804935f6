package journal_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/stretchr/testify/require"
)

// TestABatchReadsAsItWasWritten: every field of an item, in the binary
// format and in JSON (what the mirror's SQL writes), reads back as it was
// written, whole or some of its items; a body cut short or altered is
// refused or read as some batch, never a panic.
func TestABatchReadsAsItWasWritten(t *testing.T) {
	items := []journal.Item{
		{Group: "acme", ID: "j1", Attempt: 3, Task: "export", Priority: "high", RunAt: 1_700_000_000_123_456, MaxRetries: 5,
			Pending: true, Waits: []string{"a", "b"}, ExpiresAt: -7, Timeout: "30s", Tracker: "t", Subject: "s", Submitter: "u",
			TraceParent: "00-abc-def-01", Args: []byte(`{"n":1}`), Executor: "w1", Instance: "i1", Progress: 42,
			Outcome: journal.OutcomeError, Permanent: true, Counted: true, Result: []byte(`[1]`), Error: "boom",
			Charge: 0.25, RanMS: 12.5, Weight: 3, Starts: 10, PeriodMS: 60_000, Claim: "request-1", Submitted: 1_700_000_000_000_000,
			GiveBack: true, EndedAt: 1_700_000_000_654_321},
		{Group: "acme", ID: "j3", EndedAt: -5}, // an extension of one field
		{Group: "globex"},
		{Group: "acme", ID: "j2", Attempt: -1, Progress: -3},
	}
	for name, encode := range map[string]func([]journal.Item) ([]byte, error){"binary": journal.Encode, "json": journal.EncodeJSON} {
		body, err := encode(items)
		require.NoError(t, err)
		got, err := journal.Decode(body)
		require.NoError(t, err, name)
		require.Equal(t, items, got, name)
		// Some of its items, the others stepped over (claims and records
		// read their jobs' submissions so): each as it was written, and
		// an index past the batch left out.
		for _, want := range [][]int32{{0}, {1}, {2}, {0, 2}, {2, 1, 0}, {1, 7}, nil} {
			some, err := journal.DecodeSome(body, want)
			require.NoError(t, err, name)
			for _, i := range want {
				if int(i) < len(items) {
					require.Equal(t, items[i], some[i], "%s: item %d of %v", name, i, want)
				} else {
					require.NotContains(t, some, i, name)
				}
			}
			require.LessOrEqual(t, len(some), len(want))
			// The same from a row the leader keeps, read through the
			// offsets of its items the first read found.
			kept, _, err := journal.KeptDecodeSome(body, want, 1<<20)
			require.NoError(t, err, name)
			require.Equal(t, some, kept, "%s: %v from a kept row", name, want)
		}
		for n := range len(body) - 1 {
			_, err := journal.Decode(body[:n])
			require.Error(t, err, "%s: a body cut at %d of %d bytes was read", name, n, len(body))
			_, err = journal.DecodeSome(body[:n], []int32{1})
			require.Error(t, err, "%s: a body cut at %d of %d bytes was read in part", name, n, len(body))
			if n > 0 {
				_, _, err = journal.KeptDecodeSome(body[:n], []int32{1}, 1<<20)
				require.Error(t, err, "%s: a kept body cut at %d of %d bytes was read in part", name, n, len(body))
			}
		}
		for i := range body {
			bad := slices.Clone(body)
			bad[i] ^= 0xff
			_, _ = journal.Decode(bad)                    // an error or some batch; not a panic
			_, _ = journal.DecodeSome(bad, []int32{0, 2}) // the same
			_, _, _ = journal.KeptDecodeSome(bad, []int32{0, 2}, 1<<20)
		}
	}
}

// TestKeptRowsCountTheirOffsets: the offsets a kept row's first read
// finds count in the bound of the rows kept, and leave with their row.
func TestKeptRowsCountTheirOffsets(t *testing.T) {
	items := make([]journal.Item, 100)
	for i := range items {
		items[i] = journal.Item{Group: "g", ID: fmt.Sprint("job-", i), Task: "t", Args: []byte(`{"n":1}`)}
	}
	body, err := journal.Encode(items)
	require.NoError(t, err)
	row := len(body) + 4*len(items)
	bytes, kept := journal.KeptRowsBytes([][]byte{body}, 1<<20)
	require.Equal(t, row, bytes, "a row and its offsets")
	require.Equal(t, []int64{1}, kept)
	// Room for two bodies with their offsets: the first goes when the
	// third comes, and takes its offsets with it.
	bytes, kept = journal.KeptRowsBytes([][]byte{body, body, body}, 2*row+len(body)-1)
	require.Equal(t, []int64{2, 3}, kept)
	require.Equal(t, 2*row, bytes)
}
