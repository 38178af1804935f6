package coordinator

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLogLimitBoundsAFlood: of 25 lines in one second, 20 are let through;
// the first line of the next second is, after a line that counts the 5
// held back.
func TestLogLimitBoundsAFlood(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	now := time.Unix(1000, 0)
	l := newLogLimit(20)
	l.now = func() time.Time { return now }
	passed := 0
	for range 25 {
		if l.allow(log, "submissions rejected") {
			passed++
		}
	}
	require.Equal(t, 20, passed)
	require.Empty(t, out.String(), "nothing is counted before the second is over")
	now = now.Add(time.Second)
	require.True(t, l.allow(log, "submissions rejected"))
	require.Equal(t, 1, strings.Count(out.String(), "\n"))
	require.Contains(t, out.String(), "submissions rejected: more were not logged")
	require.Contains(t, out.String(), "not_logged=5")
}
