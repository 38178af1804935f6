// Package calendar parses and evaluates systemd calendar events, the timers
// of periodic tasks, in the dialect Docspell's calev library accepts:
//
//	[WEEKDAYS ]YEAR-MONTH-DAY HOUR:MINUTE[:SECOND][ TIME-ZONE]
//
// for example "Mon..Fri *-*-* 08:00", "*-*-1/7 12:00:00" or
// "*-*-* 02:30 Europe/Berlin". Each date and time part is * or a comma list
// of values, a value being n, n/r (n, n+r, n+2r, … within the part's range),
// a..b or a..b/r. Weekdays are Mon..Sun or Monday..Sunday, in any case, as a
// comma list of days and ranges. The year has 4 digits; seconds default to
// 0; the time zone is an IANA name and defaults to UTC.
//
// Unlike systemd, and like calev, no part but the weekdays and the seconds
// may be left out, and there is no "~" (days from the end of the month) and
// no shorthand such as "daily".
//
// Times are wall-clock times in the event's zone. A wall time that a
// daylight-saving change skips (02:30 on the spring-forward day in Berlin)
// does not occur, so the event does not fire then, as with systemd; a wall
// time that a change repeats (02:30 on the fall-back day) fires once, at its
// first occurrence. Next finds no time after the end of MaxYear.
package calendar

import (
	"math/bits"
	"time"

	// A scheduler must compute the same times on a host without zoneinfo.
	_ "time/tzdata"
)

// MaxYear is the last year Next searches, systemd's MAX_YEAR: an event
// that fires only later, or never (Feb 30), yields no time rather than a
// search without end. Parse still accepts any 4-digit year.
const MaxYear = 2199

// allWeekdays is the weekday set of an event that names no weekdays.
const allWeekdays = 1<<7 - 1

// Event is a parsed calendar event. It is immutable and safe for concurrent
// use.
type Event struct {
	weekdays uint8 // bit i set: time.Weekday(i) matches
	year     set   // 0..9999
	month    set   // 1..12
	day      set   // 1..31
	hour     set   // 0..23
	minute   set   // 0..59
	second   set   // 0..59
	loc      *time.Location
	text     string // the normalised form
}

// String returns the event in normalised form: single spaces, the weekdays
// as short names and ranges (left out when every day matches), numbers with
// leading zeros, the seconds always, and the time zone unless it is UTC.
// Parse gives the same event back.
func (e *Event) String() string { return e.text }

// Location returns the time zone the event's wall-clock times are in.
func (e *Event) Location() *time.Location { return e.loc }

// Matches reports whether the event fires at t: a whole second whose wall
// clock in the event's zone matches every part, and, where a daylight-saving
// change repeats that wall time, its first occurrence.
func (e *Event) Matches(t time.Time) bool {
	if t.Nanosecond() != 0 {
		return false
	}
	w := wallOf(t.In(e.loc))
	if !e.matchesWall(w) {
		return false
	}
	u, ok, _ := resolve(w, e.loc)
	return ok && u.Equal(t)
}

// Next returns the first time strictly after after at which the event
// fires, in the event's zone, and false if there is none up to the end of
// MaxYear. It steps through the parts from the year down to the second, so
// it takes microseconds however far away the time is.
func (e *Event) Next(after time.Time) (time.Time, bool) {
	// Events fire at whole seconds: the first candidate is the whole second
	// after after (Unix rounds down).
	w := skipRepeated(time.Unix(after.Unix()+1, 0).In(e.loc))
	if w.year < 0 {
		w = wall{year: 0, month: 1, day: 1}
	}
	for {
		c, ok := e.nextWall(w)
		if !ok {
			return time.Time{}, false
		}
		u, ok, gapEnd := resolve(c, e.loc)
		switch {
		case !ok: // c falls into a spring-forward gap: carry on after it
			w = wallFromSeconds(gapEnd)
		case u.After(after):
			return u.In(e.loc), true
		default: // only in a zone whose offsets change oddly
			w = wallFromSeconds(c.seconds() + 1)
		}
	}
}

// matchesWall reports whether the wall-clock time w matches every part.
func (e *Event) matchesWall(w wall) bool {
	return e.year.has(w.year) && e.month.has(w.month) && e.day.has(w.day) &&
		e.weekdays&(1<<w.weekday()) != 0 &&
		e.hour.has(w.hour) && e.minute.has(w.minute) && e.second.has(w.second)
}

// nextWall returns the first wall-clock time at or after w that matches
// every part, and false if there is none up to MaxYear.
func (e *Event) nextWall(w wall) (wall, bool) {
	y, mo, d, h, mi, s := w.year, w.month, w.day, w.hour, w.minute, w.second
	for ; ; y, mo, d, h, mi, s = y+1, 1, 1, 0, 0, 0 {
		if ny := e.year.next(y); ny != y {
			if ny < 0 {
				return wall{}, false
			}
			y, mo, d, h, mi, s = ny, 1, 1, 0, 0, 0
		}
		if y > MaxYear {
			return wall{}, false
		}
	month:
		for ; mo <= 12; mo, d, h, mi, s = mo+1, 1, 0, 0, 0 {
			if nmo := e.month.next(mo); nmo != mo {
				if nmo < 0 {
					break month
				}
				mo, d, h, mi, s = nmo, 1, 0, 0, 0
			}
			last := daysIn(y, mo)
			for ; d <= last; d, h, mi, s = d+1, 0, 0, 0 {
				if nd := e.day.next(d); nd != d {
					if nd < 0 || nd > last {
						continue month
					}
					d, h, mi, s = nd, 0, 0, 0
				}
				if e.weekdays&(1<<weekday(y, mo, d)) == 0 {
					continue
				}
				for ; h <= 23; h, mi, s = h+1, 0, 0 {
					if nh := e.hour.next(h); nh != h {
						if nh < 0 {
							break
						}
						h, mi, s = nh, 0, 0
					}
					for ; mi <= 59; mi, s = mi+1, 0 {
						if nmi := e.minute.next(mi); nmi != mi {
							if nmi < 0 {
								break
							}
							mi, s = nmi, 0
						}
						if ns := e.second.next(s); ns >= 0 {
							return wall{y, mo, d, h, mi, ns}, true
						}
					}
				}
			}
		}
	}
}

// wall is a wall-clock time, a date and a time of day in no zone.
type wall struct {
	year, month, day, hour, minute, second int
}

func wallOf(t time.Time) wall {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return wall{y, int(mo), d, h, mi, s}
}

// seconds counts the seconds from 1970-01-01 00:00:00 to w on the same
// wall clock.
func (w wall) seconds() int64 {
	return time.Date(w.year, time.Month(w.month), w.day, w.hour, w.minute, w.second, 0, time.UTC).Unix()
}

func wallFromSeconds(s int64) wall { return wallOf(time.Unix(s, 0).UTC()) }

func (w wall) weekday() time.Weekday { return weekday(w.year, w.month, w.day) }

func weekday(y, mo, d int) time.Weekday {
	return time.Date(y, time.Month(mo), d, 0, 0, 0, 0, time.UTC).Weekday()
}

func daysIn(y, mo int) int {
	return time.Date(y, time.Month(mo)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// set is a set of small non-negative integers.
type set []uint64

func newSet(max int) set { return make(set, max/64+1) }

func (s set) add(v int) { s[v/64] |= 1 << (v % 64) }

func (s set) has(v int) bool { return v >= 0 && v/64 < len(s) && s[v/64]&(1<<(v%64)) != 0 }

// next returns the least member at least v, or -1.
func (s set) next(v int) int {
	v = max(v, 0)
	i := v / 64
	if i >= len(s) {
		return -1
	}
	if rest := s[i] >> (v % 64); rest != 0 {
		return v + bits.TrailingZeros64(rest)
	}
	for i++; i < len(s); i++ {
		if s[i] != 0 {
			return i*64 + bits.TrailingZeros64(s[i])
		}
	}
	return -1
}
