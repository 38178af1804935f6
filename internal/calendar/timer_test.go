package calendar_test

import (
	"testing"
	"time"

	"github.com/fairwayhq/fairway/internal/calendar"
	"github.com/stretchr/testify/require"
)

// TestTimersReadCronAndCalendarEvents: a timer is a systemd calendar event
// (it has a time with a colon) or a standard cron expression: five fields,
// six with the seconds, a descriptor, in a time zone (CRON_TZ=); each fires
// when the expression says, and is shown as written.
func TestTimersReadCronAndCalendarEvents(t *testing.T) {
	after := time.Date(2026, 3, 27, 23, 59, 30, 0, time.UTC) // a Friday
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	for _, c := range []struct {
		timer string
		shown string
		next  []time.Time
	}{
		{"0 8 * * 1-5", "0 8 * * 1-5", []time.Time{time.Date(2026, 3, 30, 8, 0, 0, 0, time.UTC), time.Date(2026, 3, 31, 8, 0, 0, 0, time.UTC)}},
		{"  */15  *  * * * ", "*/15 * * * *", []time.Time{time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 28, 0, 15, 0, 0, time.UTC)}},
		{"30 0 12 1 * *", "30 0 12 1 * *", []time.Time{time.Date(2026, 4, 1, 12, 0, 30, 0, time.UTC), time.Date(2026, 5, 1, 12, 0, 30, 0, time.UTC)}},
		{"@hourly", "@hourly", []time.Time{time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 28, 1, 0, 0, 0, time.UTC)}},
		{"@daily", "@daily", []time.Time{time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)}},
		{"@every 30s", "@every 30s", []time.Time{time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 28, 0, 0, 30, 0, time.UTC)}},
		// 08:00 in Berlin, across the change to summer time (29 March).
		{"CRON_TZ=Europe/Berlin 0 8 * * *", "CRON_TZ=Europe/Berlin 0 8 * * *", []time.Time{time.Date(2026, 3, 28, 8, 0, 0, 0, berlin), time.Date(2026, 3, 29, 8, 0, 0, 0, berlin)}},
		{"Mon..Fri *-*-* 08:00", "Mon..Fri *-*-* 08:00:00", []time.Time{time.Date(2026, 3, 30, 8, 0, 0, 0, time.UTC), time.Date(2026, 3, 31, 8, 0, 0, 0, time.UTC)}},
	} {
		timer, err := calendar.ParseTimer(c.timer)
		require.NoError(t, err, c.timer)
		require.Equal(t, c.shown, timer.String())
		at := after
		for _, want := range c.next {
			next, ok := timer.Next(at)
			require.True(t, ok, c.timer)
			require.True(t, want.Equal(next), "%s after %s: %s, not %s", c.timer, at, next, want)
			at = next
		}
	}

	for timer, says := range map[string]string{
		"0 8 * *":                        "5 fields",
		"0 8 * * * * *":                  "5 fields",
		"61 8 * * *":                     "cron expression",
		"@fortnightly":                   "cron expression",
		"CRON_TZ=Mars/Olympus 0 8 * * *": "time zone \"Mars/Olympus\"",
		"*-*-* 25:00":                    "calendar event",
		"":                               "empty",
	} {
		_, err := calendar.ParseTimer(timer)
		require.ErrorContains(t, err, says, "%q", timer)
	}
	never, err := calendar.ParseTimer("0 0 30 2 *")
	require.NoError(t, err)
	_, ok := never.Next(after)
	require.False(t, ok, "February 30 never comes")
}
