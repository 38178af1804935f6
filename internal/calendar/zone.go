package calendar

import "time"

// day is more than any zone's offset from UTC, so the instants of a wall
// time lie within a day of the wall time read as UTC.
const day = 24 * 60 * 60

// resolve returns the first instant whose wall clock in loc is w. In a
// spring-forward gap there is none: resolve returns false and the wall
// time, in seconds as wall.seconds counts them, at which the gap ends.
//
// time.Date does not do here: in a gap it picks a time anyway, and in a
// fall-back overlap it does not promise which of the two it returns. Nor
// does Time.ZoneBounds: on the last day of a leap year beyond the zone's
// table of transitions it returns an end before the time asked about
// (golang/go#81583), which sends a walk over the periods round in
// circles. resolve relies only on offsets, and, like JavaScript's
// Temporal, on a zone changing its offset at most once within two days.
func resolve(w wall, loc *time.Location) (first time.Time, ok bool, gapEnd int64) {
	ws := w.seconds()
	if loc == time.UTC {
		return time.Unix(ws, 0), true, 0
	}
	before, after := offset(loc, ws-day), offset(loc, ws+day)
	// The larger offset gives the earlier instant: try it first.
	for _, off := range [2]int64{max(before, after), min(before, after)} {
		if u := ws - off; offset(loc, u) == off {
			return time.Unix(u, 0), true, 0
		}
	}
	// A gap: the change is after ws-after and at the latest at ws-before.
	t := transition(loc, ws-after, ws-before)
	return time.Time{}, false, max(t+offset(loc, t), ws+1)
}

// skipRepeated returns the wall clock of t, or, if t lies in the second
// occurrence of wall times that a fall-back change repeats, the wall time
// at which the repetition ends: the times in between first occurred before
// t.
func skipRepeated(t time.Time) wall {
	w := wallOf(t)
	u := t.Unix()
	off, before := offset(t.Location(), u), offset(t.Location(), u-day)
	if before <= off {
		return w
	}
	if end := transition(t.Location(), u-day, u) + before; w.seconds() < end {
		return wallFromSeconds(end)
	}
	return w
}

// offset returns loc's offset from UTC at the instant u, in seconds.
func offset(loc *time.Location, u int64) int64 {
	_, off := time.Unix(u, 0).In(loc).Zone()
	return int64(off)
}

// transition returns the first instant in (lo, hi] at which loc's offset
// is no longer the one at lo, or hi.
func transition(loc *time.Location, lo, hi int64) int64 {
	want := offset(loc, lo)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if offset(loc, mid) == want {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}
