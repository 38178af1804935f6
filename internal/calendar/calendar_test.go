package calendar

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		want string // the normal form, or, with err, ""
		err  string // the error after `calendar event "expr": `
	}{
		// Accepted, and their normal forms.
		{expr: "*-*-* 00:00", want: "*-*-* 00:00:00"},
		{expr: "  mon..FRI   *-*-1/7   8:00  ", want: "Mon..Fri *-*-01/7 08:00:00"},
		{expr: "Monday,wednesday *-*-* 12:00:00", want: "Mon,Wed *-*-* 12:00:00"},
		{expr: "Mon,Tue,Wed,Sat *-*-* 0:0", want: "Mon..Wed,Sat *-*-* 00:00:00"},
		{expr: "Sat,Sun,Mon *-*-* 10:00", want: "Mon,Sat,Sun *-*-* 10:00:00"},
		{expr: "Mon..Sun *-*-* 00:00", want: "*-*-* 00:00:00"},
		{expr: "Sat..Sat *-*-* 00:00", want: "Sat *-*-* 00:00:00"},
		{expr: "*-*-* *:0/15", want: "*-*-* *:00/15:00"},
		{expr: "2024-02-29 00:00", want: "2024-02-29 00:00:00"},
		{expr: "2025..2027-1,5,9-* 10:00", want: "2025..2027-01,05,09-* 10:00:00"},
		{expr: "2024/4-01-01 00:00", want: "2024/4-01-01 00:00:00"},
		{expr: "*-*-* 10:00:5,10,45", want: "*-*-* 10:00:05,10,45"},
		{expr: "*-*-* *:*:0..30/10", want: "*-*-* *:*:00..30/10"},
		{expr: "*-*-* 0..23/06:00", want: "*-*-* 00..23/6:00:00"},
		{expr: "*-*-* 02:30 Europe/Berlin", want: "*-*-* 02:30:00 Europe/Berlin"},
		{expr: "*-*-* 02:30 UTC", want: "*-*-* 02:30:00"},
		{expr: "*-*-* 02:30 utc", want: "*-*-* 02:30:00"},
		{expr: "*-*-* 02:30 Etc/UTC", want: "*-*-* 02:30:00 Etc/UTC"},

		// Rejected, naming the bad part.
		{expr: "*-*-* 88:00", err: "hour value 88 not in range 0..23"},
		{expr: "*-*-* 12:x", err: `minute: "x" is not a number`},
		{expr: "Funday *-*-* 00:00", err: `weekday "Funday" unknown (Mon..Sun or Monday..Sunday)`},
		{expr: "Mon..Fryday *-*-* 00:00", err: `weekday "Fryday" unknown (Mon..Sun or Monday..Sunday)`},
		{expr: "Fri..Mon *-*-* 00:00", err: "weekday range Fri..Mon runs backwards (weeks start on Monday): write Mon,Fri..Sun"},
		{expr: "20-01-01 00:00", err: `year "20" must have 4 digits or be *`},
		{expr: "2020..20210-01-01 00:00", err: `year "20210" must have 4 digits or be *`},
		{expr: "*-*-* *:0/0", err: "minute: repetition /0 must be at least 1"},
		{expr: "*-*-* *:0/x", err: `minute: repetition "/x" is not a number`},
		{expr: "*-*-* *:*/15", err: `minute: "*/15": * must stand alone (for a repetition give its start, such as 0/15)`},
		{expr: "*-*-* 00:00 Mars/Base", err: `unknown time zone "Mars/Base"`},
		{expr: "*-*-* 00:00 Local", err: `unknown time zone "Local": name the zone, such as Europe/Berlin`},
		{expr: "*-*-* 00:00 ../etc/passwd", err: `unknown time zone "../etc/passwd"`},
		{expr: "", err: `expected "DATE TIME", got ""`},
		{expr: "*-*-*", err: `expected "DATE TIME", got "*-*-*"`},
		{expr: "12:00", err: `expected "DATE TIME", got "12:00"`},
		{expr: "Mon 12:00", err: `expected "DATE TIME", got "Mon 12:00"`},
		{expr: "Mon Tue *-*-* 12:00", err: `expected "[WEEKDAYS ]DATE TIME", got "Mon Tue *-*-* 12:00" (weekdays are one list, such as Mon,Wed or Mon..Fri)`},
		{expr: "*-*-* 00:00 Europe/Berlin daily", err: `unexpected "daily" after the time zone`},
		{expr: "*-* 00:00", err: `date "*-*" must be YEAR-MONTH-DAY`},
		{expr: "*-*-* 00:00:00:00", err: `time "00:00:00:00" must be HOUR:MINUTE or HOUR:MINUTE:SECOND`},
		{expr: "*-13-* 00:00", err: "month value 13 not in range 1..12"},
		{expr: "*-0-* 00:00", err: "month value 0 not in range 1..12"},
		{expr: "*-*-32 00:00", err: "day value 32 not in range 1..31"},
		{expr: "*-*-0 00:00", err: "day value 0 not in range 1..31"},
		{expr: "*-*-* 00:60", err: "minute value 60 not in range 0..59"},
		{expr: "*-*-* 00:00:60", err: "second value 60 not in range 0..59"},
		{expr: "*-*-* 99999999999999999999:00", err: "hour value 99999999999999999999 not in range 0..23"},
		{expr: "*-*-* 10..2:00", err: "hour range 10..2 is empty: its start is after its end"},
		{expr: "*-*-* 1,,2:00", err: `hour: "" is not a number`},
		{expr: "*-*-* 1.5:00", err: `hour: "1.5" is not a number`},
		{expr: "*-*-* -1:00", err: `hour: "-1" is not a number`},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			t.Parallel()
			e, err := Parse(tc.expr)
			if tc.err != "" {
				require.Nil(t, e)
				require.EqualError(t, err, `calendar event "`+tc.expr+`": `+tc.err)
				var pe *ParseError
				require.True(t, errors.As(err, &pe))
				require.Equal(t, tc.expr, pe.Expr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, e.String())
			again, err := Parse(e.String())
			require.NoError(t, err)
			requireSameEvent(t, e, again)
		})
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		expr  string
		after string   // RFC 3339
		want  []string // the next times in turn, RFC 3339; none after them
		more  bool     // there are times after want
	}{
		{name: "daily", expr: "*-*-* 00:00", after: "2026-01-15T10:00:00Z", more: true,
			want: []string{"2026-01-16T00:00:00Z", "2026-01-17T00:00:00Z"}},
		{name: "strictly after a match", expr: "*-*-* 00:00", after: "2026-01-16T00:00:00Z", more: true,
			want: []string{"2026-01-17T00:00:00Z"}},
		{name: "fraction of a second before", expr: "*-*-* 00:00", after: "2026-01-15T23:59:59.999999999Z", more: true,
			want: []string{"2026-01-16T00:00:00Z"}},
		{name: "fraction of a second after", expr: "*-*-* 00:00", after: "2026-01-16T00:00:00.000000001Z", more: true,
			want: []string{"2026-01-17T00:00:00Z"}},
		{name: "weekdays on every 7th day skip March 2026, all Sundays", expr: "Mon..Fri *-*-1/7 8:00", after: "2026-02-28T00:00:00Z", more: true,
			want: []string{"2026-04-01T08:00:00Z", "2026-04-08T08:00:00Z", "2026-04-15T08:00:00Z", "2026-04-22T08:00:00Z", "2026-04-29T08:00:00Z", "2026-05-01T08:00:00Z"}},
		{name: "Monday and Wednesday noon", expr: "Mon,Wed *-*-* 12:00:00", after: "2026-01-15T00:00:00Z", more: true,
			want: []string{"2026-01-19T12:00:00Z", "2026-01-21T12:00:00Z", "2026-01-26T12:00:00Z"}},
		{name: "Friday the 13th", expr: "Fri *-*-13 00:00", after: "2026-01-01T00:00:00Z", more: true,
			want: []string{"2026-02-13T00:00:00Z", "2026-03-13T00:00:00Z", "2026-11-13T00:00:00Z"}},
		{name: "every 15 minutes", expr: "*-*-* *:0/15", after: "2026-05-01T10:07:00Z", more: true,
			want: []string{"2026-05-01T10:15:00Z", "2026-05-01T10:30:00Z", "2026-05-01T10:45:00Z", "2026-05-01T11:00:00Z"}},
		{name: "every 15 minutes over midnight at a year end", expr: "*-*-* *:0/15", after: "2026-12-31T23:50:00Z", more: true,
			want: []string{"2027-01-01T00:00:00Z"}},
		{name: "leap day", expr: "2024-02-29 00:00", after: "2023-06-01T00:00:00Z",
			want: []string{"2024-02-29T00:00:00Z"}},
		{name: "leap day only in leap years", expr: "*-02-29 00:00", after: "2024-03-01T00:00:00Z", more: true,
			want: []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{name: "no leap day in 2100", expr: "*-02-29 00:00", after: "2096-03-01T00:00:00Z", more: true,
			want: []string{"2104-02-29T00:00:00Z"}},
		{name: "31st skips 30-day months", expr: "*-*-31 00:00", after: "2026-01-31T00:00:00Z", more: true,
			want: []string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z", "2026-10-31T00:00:00Z", "2026-12-31T00:00:00Z", "2027-01-31T00:00:00Z"}},
		{name: "last second of the year", expr: "*-12-31 23:59:59", after: "2026-12-31T23:59:58Z", more: true,
			want: []string{"2026-12-31T23:59:59Z", "2027-12-31T23:59:59Z"}},
		{name: "year range", expr: "2025..2027-06-01 12:00", after: "2026-07-01T00:00:00Z",
			want: []string{"2027-06-01T12:00:00Z"}},
		{name: "year repetition", expr: "2024/4-01-01 00:00", after: "2025-01-01T00:00:00Z", more: true,
			want: []string{"2028-01-01T00:00:00Z", "2032-01-01T00:00:00Z"}},
		{name: "month list", expr: "2026-1,5,9-* 10:00", after: "2026-01-31T10:00:00Z", more: true,
			want: []string{"2026-05-01T10:00:00Z"}},
		{name: "second list", expr: "*-*-* 10:00:5,10,45", after: "2026-05-01T10:00:07Z", more: true,
			want: []string{"2026-05-01T10:00:10Z", "2026-05-01T10:00:45Z", "2026-05-02T10:00:05Z"}},
		{name: "second range with repetition", expr: "*-*-* *:*:0..30/10", after: "2026-05-01T12:00:25Z", more: true,
			want: []string{"2026-05-01T12:00:30Z", "2026-05-01T12:01:00Z", "2026-05-01T12:01:10Z"}},
		{name: "hours 0/6", expr: "*-*-* 0/6:00", after: "2026-05-01T19:00:00Z", more: true,
			want: []string{"2026-05-02T00:00:00Z", "2026-05-02T06:00:00Z"}},
		{name: "in the past", expr: "2001-*-* 00:00", after: "2002-01-01T00:00:00Z"},
		{name: "never: Feb 30", expr: "*-02-30 00:00", after: "2026-01-01T00:00:00Z"},
		{name: "never: Apr 31 on a Monday", expr: "Mon *-04-31 00:00", after: "2026-01-01T00:00:00Z"},
		{name: "not after MaxYear", expr: "2200-01-01 00:00", after: "2026-01-01T00:00:00Z"},
		{name: "up to the end of MaxYear", expr: "*-12-31 23:59:59", after: "2199-01-01T00:00:00Z",
			want: []string{"2199-12-31T23:59:59Z"}},
		{name: "from long ago", expr: "*-*-* 00:00", after: "0001-01-01T00:00:00Z", more: true,
			want: []string{"0001-01-02T00:00:00Z"}},
		{name: "answers in the event's zone", expr: "*-*-* 09:00 America/New_York", after: "2026-01-10T12:00:00Z", more: true,
			want: []string{"2026-01-10T09:00:00-05:00", "2026-01-11T09:00:00-05:00"}},
		{name: "a zone without DST, half an hour off", expr: "*-*-* 00:00 Asia/Kolkata", after: "2026-01-10T12:00:00Z", more: true,
			want: []string{"2026-01-11T00:00:00+05:30"}},
		{name: "spring forward: 02:30 does not exist on 2026-03-29", expr: "*-*-* 02:30 Europe/Berlin", after: "2026-03-27T12:00:00+01:00", more: true,
			want: []string{"2026-03-28T02:30:00+01:00", "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"}},
		{name: "spring forward: from inside the gap day", expr: "*-*-* 02:30 Europe/Berlin", after: "2026-03-29T01:59:59+01:00", more: true,
			want: []string{"2026-03-30T02:30:00+02:00"}},
		{name: "spring forward: every 15 minutes jumps the gap", expr: "*-*-* *:0/15 Europe/Berlin", after: "2026-03-29T01:40:00+01:00", more: true,
			want: []string{"2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"}},
		{name: "spring forward: a date that exists only in the gap", expr: "2026-03-29 02:30 Europe/Berlin", after: "2026-01-01T00:00:00Z"},
		{name: "spring forward by half an hour", expr: "*-*-* 02:15 Australia/Lord_Howe", after: "2026-10-03T12:00:00+10:30", more: true,
			want: []string{"2026-10-05T02:15:00+11:00"}},
		{name: "fall back: 02:30 fires once, the first time", expr: "*-*-* 02:30 Europe/Berlin", after: "2026-10-24T12:00:00+02:00", more: true,
			want: []string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{name: "fall back: from between the two 02:30s", expr: "*-*-* 02:30 Europe/Berlin", after: "2026-10-25T02:45:00+02:00", more: true,
			want: []string{"2026-10-26T02:30:00+01:00"}},
		{name: "fall back: from inside the repeated hour", expr: "*-*-* 02:30 Europe/Berlin", after: "2026-10-25T02:10:00+01:00", more: true,
			want: []string{"2026-10-26T02:30:00+01:00"}},
		{name: "fall back: every 15 minutes skips the repeated hour", expr: "*-*-* *:0/15 Europe/Berlin", after: "2026-10-25T02:40:00+02:00", more: true,
			want: []string{"2026-10-25T02:45:00+02:00", "2026-10-25T03:00:00+01:00", "2026-10-25T03:15:00+01:00"}},
		{name: "fall back: every 15 minutes from inside the repeated hour", expr: "*-*-* *:0/15 Europe/Berlin", after: "2026-10-25T02:05:00+01:00", more: true,
			want: []string{"2026-10-25T03:00:00+01:00"}},
		{name: "last day of a leap year, beyond the zone's table (golang/go#81583)", expr: "*-*-31 00:00 America/New_York", after: "2076-12-30T12:00:00Z", more: true,
			want: []string{"2076-12-31T00:00:00-05:00", "2077-01-31T00:00:00-05:00"}},
		{name: "US spring forward", expr: "*-*-* 02:00 America/New_York", after: "2026-03-07T12:00:00-05:00", more: true,
			want: []string{"2026-03-09T02:00:00-04:00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := Parse(tc.expr)
			require.NoError(t, err)
			at := mustTime(t, tc.after)
			for _, want := range tc.want {
				next, ok := e.Next(at)
				require.True(t, ok, "nothing after %s, want %s", at, want)
				require.Equal(t, want, next.Format(time.RFC3339Nano), "after %s", at)
				require.Equal(t, e.Location(), next.Location())
				require.True(t, e.Matches(next))
				at = next
			}
			next, ok := e.Next(at)
			require.Equal(t, tc.more, ok, "after %s: got %s", at, next)
			if !ok {
				require.True(t, next.IsZero())
			}
		})
	}
}

func TestMatches(t *testing.T) {
	t.Parallel()
	berlin, err := Parse("*-*-* 02:30 Europe/Berlin")
	require.NoError(t, err)
	for _, tc := range []struct {
		at   string
		want bool
	}{
		{"2026-10-24T02:30:00+02:00", true},
		{"2026-10-24T00:30:00Z", true}, // the same instant
		{"2026-10-24T02:30:00.5+02:00", false},
		{"2026-10-24T02:31:00+02:00", false},
		{"2026-10-25T02:30:00+02:00", true},  // the first 02:30
		{"2026-10-25T02:30:00+01:00", false}, // the repeated one
		{"2026-03-29T03:30:00+02:00", false}, // not 02:30 moved forward
	} {
		require.Equal(t, tc.want, berlin.Matches(mustTime(t, tc.at)), tc.at)
	}
}

// TestNextAgainstMatches checks Next against a scan of every second, around
// the daylight-saving changes of several zones: Next must return exactly the
// seconds that match.
func TestNextAgainstMatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		from string
	}{
		{"*-*-* *:0/15:0/20 Europe/Berlin", "2026-03-29T00:00:00+01:00"},
		{"*-*-* *:0/15:0/20 Europe/Berlin", "2026-10-25T00:00:00+02:00"},
		{"*-*-* 1..3:*:00 Europe/Berlin", "2026-10-25T00:00:00+02:00"},
		{"Sun *-*-* 1..3:*:00 Europe/Berlin", "2026-03-28T22:00:00+01:00"},
		{"*-*-* 2:0/5:0 Australia/Lord_Howe", "2026-10-04T00:00:00+10:30"},
		{"*-*-* 1:*:0/30 Australia/Lord_Howe", "2026-04-05T00:00:00+11:00"},
		{"*-*-* *:*:0/10 America/New_York", "2026-11-01T00:00:00-04:00"},
		{"*-*-* 23,0:59,0:59,0", "2026-12-31T22:00:00Z"},
	} {
		t.Run(tc.expr+" from "+tc.from, func(t *testing.T) {
			t.Parallel()
			e, err := Parse(tc.expr)
			require.NoError(t, err)
			from := mustTime(t, tc.from)
			end := from.Add(5 * time.Hour)
			next, ok := e.Next(from)
			for at := from.Add(time.Second); at.Before(end); at = at.Add(time.Second) {
				if e.Matches(at) {
					require.True(t, ok)
					require.True(t, at.Equal(next), "Next returned %s, not %s: it missed a match or returned one too late", next, at)
					next, ok = e.Next(at)
				} else if ok {
					require.True(t, next.After(at), "Next returned %s, which does not match", next)
				}
			}
		})
	}
}

// TestNextRandom calls Next 1,000 times in a row from random events and
// times: each result must be strictly after its argument and match.
func TestNextRandom(t *testing.T) {
	t.Parallel()
	exprs := []string{
		"*-*-* 00:00", "Mon..Fri *-*-1/7 8:00", "*-*-* *:0/15 Europe/Berlin", "*-02,03-29 00:00",
		"*-*-31 00:00 America/New_York", "Sat,Sun *-*-* 2:30 Europe/London", "*-*-* *:*:*",
		"2020..2199-1,6-1..5 1/3:7:9 Australia/Lord_Howe",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var e *Event
	var at time.Time
	for i := range 1000 {
		if i%50 == 0 {
			var err error
			e, err = Parse(exprs[rng.IntN(len(exprs))])
			require.NoError(t, err)
			at = time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)) // up to 2096
		}
		next, ok := e.Next(at)
		require.True(t, ok, "%s after %s", e, at) // every 2 years at least, so never beyond 2199
		require.True(t, next.After(at), "%s after %s: %s", e, at, next)
		require.True(t, e.Matches(next), "%s after %s: %s", e, at, next)
		at = next
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return at
}

// requireSameEvent fails unless a and b are the same event.
func requireSameEvent(t testing.TB, a, b *Event) {
	t.Helper()
	require.Equal(t, a.String(), b.String())
	require.Equal(t, a.Location().String(), b.Location().String())
	a2, b2 := *a, *b
	a2.loc, b2.loc = nil, nil
	require.Equal(t, a2, b2)
}

func BenchmarkNext(b *testing.B) {
	for _, expr := range []string{
		"*-*-* 00:00", "Mon..Fri *-*-1/7 8:00", "*-*-* 02:30 Europe/Berlin", "Fri *-02-29 00:00", "*-02-30 00:00",
	} {
		b.Run(expr, func(b *testing.B) {
			e, err := Parse(expr)
			require.NoError(b, err)
			from := time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)
			for b.Loop() {
				e.Next(from)
			}
		})
	}
}
