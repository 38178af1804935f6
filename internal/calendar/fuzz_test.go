package calendar

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzParse checks, for any input, that Parse does not panic and rejects
// with a ParseError, or that the event it returns prints as an expression
// that parses to the same event, and that Next from a few times ends soon
// with a time that is strictly later and matches, and that no second in
// between matches.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"*-*-* 00:00", "Mon..Fri *-*-1/7 8:00", "Mon,Wed *-*-* 12:00:00", "*-*-* *:0/15",
		"2024-02-29 00:00", "*-02-29 00:00", "*-*-31 00:00", "*-*-* 02:30 Europe/Berlin",
		"*-*-* *:0/15:0/20 Europe/Berlin", "2025..2027-06-01 12:00", "*-*-* 10:00:5,10,45",
		"*-*-* *:*:0..30/10", "Sat,Sun *-*-* 2:30 America/New_York", "*-*-* 02:15 Australia/Lord_Howe",
		"2001-*-* 00:00", "*-02-30 00:00", "2024/4-01-01 00:00", "*-*-* *:*:*", "Fri *-*-13 00:00",
		"*-*-* 88:00", "*-*-* 12:x", "Funday *-*-* 00:00", "20-01-01 00:00", "*-*-* *:0/0",
		"*-*-* 00:00 Mars/Base", "Mon 12:00", "Fri..Mon *-*-* 00:00", "*-*-* 10..2:00",
	} {
		f.Add(seed)
	}
	froms := []time.Time{
		time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC),  // Europe's spring-forward day
		time.Date(2026, 10, 25, 0, 10, 0, 0, time.UTC), // inside Berlin's repeated hour
		time.Date(2024, 2, 28, 23, 59, 59, 500_000_000, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(MaxYear, 12, 31, 23, 0, 0, 0, time.UTC),
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Expr != s || !strings.HasPrefix(err.Error(), "calendar event ") {
				t.Fatalf("Parse(%q): error %v is not a ParseError for the expression", s, err)
			}
			return
		}
		again, err := Parse(e.String())
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", s, e.String(), err)
		}
		requireSameEvent(t, e, again)

		for _, from := range froms {
			began := time.Now()
			next, ok := e.Next(from)
			if took := time.Since(began); took > 5*time.Second {
				t.Fatalf("%s: Next(%s) took %s", e, from, took)
			}
			if !ok {
				if !next.IsZero() {
					t.Fatalf("%s: Next(%s) = %s, false", e, from, next)
				}
				continue
			}
			if !next.After(from) || !e.Matches(next) || next.Location() != e.Location() || next.Year() > MaxYear {
				t.Fatalf("%s: Next(%s) = %s, which is not a later match in the event's zone", e, from, next)
			}
			if again, _ := e.Next(next.Add(-time.Nanosecond)); !again.Equal(next) {
				t.Fatalf("%s: Next(%s) = %s, but Next(%s) = %s", e, from, next, next.Add(-time.Nanosecond), again)
			}
			for at := from.Truncate(time.Second).Add(time.Second); at.Before(next) && at.Sub(from) < 10*time.Minute; at = at.Add(time.Second) {
				if e.Matches(at) {
					t.Fatalf("%s: Next(%s) = %s, but %s matches", e, from, next, at)
				}
			}
		}
	})
}
