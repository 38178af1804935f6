package cli

import (
	"fmt"
	"time"

	"github.com/fairwayhq/fairway/internal/calendar"
	"github.com/spf13/cobra"
)

// newCalendarCmd shows when a calendar event fires. It reads no
// configuration and connects to nothing, so it is not wrapped in
// withConfig.
func newCalendarCmd(e *env) *cobra.Command {
	var next int
	var after string
	cmd := &cobra.Command{
		Use:   "calendar EXPR [--next N] [--after TIME]",
		Short: "Show when a timer of a periodic task (calendar event or cron) fires next",
		Long: `Parse EXPR, the timer of a periodic task, and print the next N times it
fires, one RFC 3339 time a line in the timer's time zone. A timer is either a
systemd-style calendar event, as Docspell's periodic tasks use:

  [WEEKDAYS ]YEAR-MONTH-DAY HOUR:MINUTE[:SECOND][ TIME-ZONE]

where each date and time part is * or a comma list of values: n, n/r (n and
every r-th value after it), a..b or a..b/r; weekdays are Mon..Sun or
Monday..Sunday; the time zone is an IANA name (default UTC); a wall time that
a daylight-saving change skips does not fire, one that it repeats fires once.

Or a standard cron expression, read by robfig/cron (as River's and many
schedulers' are): 5 fields (minute hour day-of-month month day-of-week), 6
with the seconds first, or @yearly, @monthly, @weekly, @daily, @hourly,
@every DURATION; in a time zone with a 'CRON_TZ=Europe/Berlin ' prefix
(default UTC). A calendar event always has a time with a colon, a cron
expression never does: that tells them apart.`,
		Example: `  fairway calendar '*-*-* 00:00'
  fairway calendar 'Mon..Fri *-*-* 08:00 Europe/Berlin' --next 10
  fairway calendar '*-*-* *:0/15' --after 2026-03-29T00:00:00Z
  fairway calendar '0 8 * * 1-5'
  fairway calendar 'CRON_TZ=America/New_York 30 2 * * *' --next 3
  fairway calendar '@every 90s'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ev, err := calendar.ParseTimer(args[0])
			if err != nil {
				return usageError{err}
			}
			if next < 1 {
				return usageError{fmt.Errorf("--next %d: must be at least 1", next)}
			}
			from := time.Now()
			if after != "" {
				if from, err = time.Parse(time.RFC3339, after); err != nil {
					return usageError{fmt.Errorf("--after: %q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", after)}
				}
			}
			at := from
			for i := range next {
				t, ok := ev.Next(at)
				if !ok {
					if i == 0 {
						return fmt.Errorf("%s %q does not fire after %s (Fairway looks until the end of %d for a calendar event, five years ahead for cron)",
							calendar.KindOf(ev), ev, from.Format(time.RFC3339), calendar.MaxYear)
					}
					fmt.Fprintf(e.stderr, "fairway: %s %q does not fire again\n", calendar.KindOf(ev), ev)
					return nil
				}
				fmt.Fprintln(e.stdout, t.Format(time.RFC3339))
				at = t
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&next, "next", 5, "how many times to print")
	cmd.Flags().StringVar(&after, "after", "", "print the times after this RFC 3339 time (default now)")
	return cmd
}
