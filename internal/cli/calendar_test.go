package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCalendarPrintsNextTimes(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "calendar", "*-*-* 02:30 Europe/Berlin", "--after", "2026-03-27T12:00:00Z", "--next", "3")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "2026-03-28T02:30:00+01:00\n2026-03-30T02:30:00+02:00\n2026-03-31T02:30:00+02:00\n", out,
		"02:30 does not exist on 2026-03-29 in Berlin")
	require.Empty(t, errOut)
}

func TestCalendarDefaultsToFiveTimesFromNow(t *testing.T) {
	t.Parallel()
	before := time.Now()
	code, out, errOut := run(t, "calendar", "*-*-* *:*:0/10")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 5)
	prev := before
	for _, line := range lines {
		at, err := time.Parse(time.RFC3339, line)
		require.NoError(t, err)
		require.True(t, at.After(prev.Truncate(time.Second)), "%s after %s", at, prev)
		require.Zero(t, at.Second()%10)
		prev = at
	}
}

func TestCalendarEndsWhenTheEventDoes(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "calendar", "2026-01-1..2 00:00", "--after", "2025-12-31T00:00:00Z")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "2026-01-01T00:00:00Z\n2026-01-02T00:00:00Z\n", out)
	require.Contains(t, errOut, "does not fire again")

	code, out, errOut = run(t, "calendar", "2001-*-* 00:00", "--after", "2002-01-01T00:00:00Z")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, `calendar event "2001-*-* 00:00:00" does not fire after 2002-01-01T00:00:00Z`)
}

func TestCalendarErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"calendar", "*-*-* 88:00"}, 2, `fairway: calendar event "*-*-* 88:00": hour value 88 not in range 0..23`},
		{[]string{"calendar", "Funday *-*-* 00:00"}, 2, `weekday "Funday" unknown (Mon..Sun or Monday..Sunday)`},
		{[]string{"calendar", "*-*-* 00:00 Mars/Base"}, 2, `unknown time zone "Mars/Base"`},
		{[]string{"calendar", "*-*-* 00:00", "--after", "yesterday"}, 2, `--after: "yesterday" is not an RFC 3339 time`},
		{[]string{"calendar", "*-*-* 00:00", "--next", "0"}, 2, "--next 0: must be at least 1"},
		{[]string{"calendar", "*-*-* 00:00", "--next", "x"}, 2, `invalid argument "x" for "--next"`},
		{[]string{"calendar"}, 2, "accepts 1 arg(s), received 0"}, // a usage error, like the others
	} {
		code, out, errOut := run(t, tc.args...)
		require.Equal(t, tc.code, code, "%q: %s", tc.args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, tc.err)
	}
}
