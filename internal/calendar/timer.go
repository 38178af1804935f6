package calendar

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Timer is when a periodic task fires: a calendar event (*Event) or a
// cron expression (ParseTimer).
type Timer interface {
	// Next returns the first time the timer fires strictly after after,
	// and false when it never fires again.
	Next(after time.Time) (time.Time, bool)
	// Location is the time zone the timer's wall times are in.
	Location() *time.Location
	// String is the timer as it is stored and shown: a calendar event
	// normalised, a cron expression as written (its fields single-spaced).
	String() string
}

// KindOf names the kind of a timer: "calendar event" or "cron expression".
func KindOf(t Timer) string {
	if _, ok := t.(*Event); ok {
		return "calendar event"
	}
	return "cron expression"
}

// Upcoming returns the n times a timer fires from first (its next run,
// which comes first) on, in the timer's zone: fewer when it stops firing.
func Upcoming(t Timer, first time.Time, n int) []time.Time {
	if n <= 0 {
		return nil
	}
	at := first.In(t.Location())
	out := []time.Time{at}
	for len(out) < n {
		next, ok := t.Next(at)
		if !ok {
			break
		}
		out, at = append(out, next), next
	}
	return out
}

// ParseTimer parses the timer of a periodic task: a systemd calendar event
// (see Parse), or a standard cron expression through robfig/cron (v3):
// five fields (minute hour day-of-month month day-of-week), six with the
// seconds first, or a descriptor (@yearly, @monthly, @weekly, @daily,
// @midnight, @hourly, @every 30s), optionally after a time zone as
// "CRON_TZ=Europe/Berlin " (or "TZ="); UTC by default. A calendar event
// always has a time with a colon (08:00), a cron expression never does:
// that tells them apart.
func ParseTimer(s string) (Timer, error) {
	trimmed := strings.TrimSpace(s)
	if strings.HasPrefix(trimmed, "@") || isZoned(trimmed) || !strings.Contains(trimmed, ":") {
		return parseCron(trimmed)
	}
	ev, err := Parse(s)
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// cronParser reads standard cron, with optional seconds and descriptors.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronTimer is a parsed cron expression.
type cronTimer struct {
	schedule cron.Schedule
	loc      *time.Location
	text     string
}

// isZoned says whether a cron expression starts with its time zone.
func isZoned(s string) bool { return strings.HasPrefix(s, "CRON_TZ=") || strings.HasPrefix(s, "TZ=") }

func parseCron(s string) (Timer, error) {
	if s == "" {
		return nil, &ParseError{Expr: s, Cron: true, Err: errors.New("empty: expected a calendar event such as \"*-*-* 08:00\" or a cron expression such as \"0 8 * * 1-5\"")}
	}
	text := strings.Join(strings.Fields(s), " ")
	loc := time.UTC
	spec := text
	if isZoned(text) {
		zone, rest, _ := strings.Cut(text, " ")
		_, name, _ := strings.Cut(zone, "=")
		l, err := time.LoadLocation(name)
		if err != nil {
			return nil, &ParseError{Expr: s, Cron: true, Err: fmt.Errorf("time zone %q: not an IANA name such as Europe/Berlin", name)}
		}
		loc, spec = l, rest
	}
	if !strings.HasPrefix(spec, "@") {
		if n := len(strings.Fields(spec)); n != 5 && n != 6 {
			return nil, &ParseError{Expr: s, Cron: true, Err: fmt.Errorf(
				"5 fields (minute hour day-of-month month day-of-week), or 6 with the seconds first, not %d; "+
					"a calendar event has a date and a time (\"*-*-* 08:00\")", n)}
		}
	}
	// The zone is given to the parser as it reads it (CRON_TZ=): the
	// schedule's wall times are in it.
	schedule, err := cronParser.Parse("CRON_TZ=" + loc.String() + " " + spec)
	if err != nil {
		return nil, &ParseError{Expr: s, Cron: true, Err: err}
	}
	return &cronTimer{schedule: schedule, loc: loc, text: text}, nil
}

// Next looks five years ahead (robfig's schedules give up then, with a
// zero time), as for "0 0 30 2 *", which never fires.
func (c *cronTimer) Next(after time.Time) (time.Time, bool) {
	t := c.schedule.Next(after.In(c.loc))
	if t.IsZero() {
		return time.Time{}, false
	}
	return t, true
}

func (c *cronTimer) Location() *time.Location { return c.loc }

func (c *cronTimer) String() string { return c.text }
