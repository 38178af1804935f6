package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestParseDays: durations may be given in days (issue 22: `jobs prune
// --older-than 7d` was refused).
func TestParseDays(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "2d30m": 48*time.Hour + 30*time.Minute, "36h": 36 * time.Hour,
		"30m": 30 * time.Minute, "1ns": 1, "-1d": -24 * time.Hour, "0d": 0, "0": 0,
	} {
		got, err := parseDays(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "d", "7", "1.5d", "7days", "d7", "1d-2h", "1d+2h", "x", "99999999d"} {
		_, err := parseDays(in)
		require.Error(t, err, in)
	}
}
