package calendar

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseError is the error Parse returns: Err names the bad part of Expr.
type ParseError struct {
	Expr string // the expression, as given
	Err  error  // what is wrong with it
	Cron bool   // read as a cron expression (ParseTimer)
}

func (e *ParseError) Error() string {
	if e.Cron {
		return fmt.Sprintf("cron expression %q: %v", e.Expr, e.Err)
	}
	return fmt.Sprintf("calendar event %q: %v", e.Expr, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// Parse parses a calendar event, such as "Mon..Fri *-*-* 08:00" or
// "*-*-01 00:00:00 Europe/Berlin"; see the package documentation for the
// syntax. Parts are separated by spaces (any white space, any amount).
func Parse(s string) (*Event, error) {
	e, err := parse(s)
	if err != nil {
		return nil, &ParseError{Expr: s, Err: err}
	}
	return e, nil
}

func parse(s string) (*Event, error) {
	parts := strings.Fields(s)
	at := -1 // the time: the first part with a colon
	for i, p := range parts {
		if strings.Contains(p, ":") {
			at = i
			break
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("expected \"DATE TIME\", got %q", strings.Join(parts, " "))
	}
	if at == 0 || !strings.Contains(parts[at-1], "-") {
		return nil, fmt.Errorf("expected \"DATE TIME\", got %q", strings.Join(parts[:at+1], " "))
	}
	if at > 2 {
		return nil, fmt.Errorf("expected \"[WEEKDAYS ]DATE TIME\", got %q (weekdays are one list, such as Mon,Wed or Mon..Fri)", strings.Join(parts[:at+1], " "))
	}
	if len(parts) > at+2 {
		return nil, fmt.Errorf("unexpected %q after the time zone", strings.Join(parts[at+2:], " "))
	}

	e := &Event{weekdays: allWeekdays, loc: time.UTC}
	var text []string
	if at == 2 {
		var err error
		if e.weekdays, err = parseWeekdays(parts[0]); err != nil {
			return nil, err
		}
		if e.weekdays != allWeekdays {
			text = append(text, formatWeekdays(e.weekdays))
		}
	}

	date := strings.Split(parts[at-1], "-")
	if len(date) != 3 {
		return nil, fmt.Errorf("date %q must be YEAR-MONTH-DAY", parts[at-1])
	}
	clock := strings.Split(parts[at], ":")
	if len(clock) != 2 && len(clock) != 3 {
		return nil, fmt.Errorf("time %q must be HOUR:MINUTE or HOUR:MINUTE:SECOND", parts[at])
	}
	if len(clock) == 2 {
		clock = append(clock, "0")
	}
	var normal [6]string
	for i, c := range []struct {
		f   field
		s   string
		dst *set
	}{
		{yearField, date[0], &e.year}, {monthField, date[1], &e.month}, {dayField, date[2], &e.day},
		{hourField, clock[0], &e.hour}, {minuteField, clock[1], &e.minute}, {secondField, clock[2], &e.second},
	} {
		var err error
		if *c.dst, normal[i], err = c.f.parse(c.s); err != nil {
			return nil, err
		}
	}
	text = append(text, strings.Join(normal[:3], "-"), strings.Join(normal[3:], ":"))

	if at+1 < len(parts) {
		var err error
		if e.loc, err = parseZone(parts[at+1]); err != nil {
			return nil, err
		}
		if e.loc != time.UTC {
			text = append(text, e.loc.String())
		}
	}
	e.text = strings.Join(text, " ")
	return e, nil
}

// field describes a date or time part.
type field struct {
	name     string
	min, max int
	digits   int // how many digits a value must have, if not 0
}

var (
	yearField   = field{name: "year", min: 0, max: 9999, digits: 4}
	monthField  = field{name: "month", min: 1, max: 12}
	dayField    = field{name: "day", min: 1, max: 31}
	hourField   = field{name: "hour", min: 0, max: 23}
	minuteField = field{name: "minute", min: 0, max: 59}
	secondField = field{name: "second", min: 0, max: 59}
)

// parse parses a part: * or a comma list of n, n/r, a..b and a..b/r. It
// returns the values and the part in normal form.
func (f field) parse(s string) (set, string, error) {
	values := newSet(f.max)
	if s == "*" {
		for v := f.min; v <= f.max; v++ {
			values.add(v)
		}
		return values, "*", nil
	}
	var normal []string
	for item := range strings.SplitSeq(s, ",") {
		if strings.Contains(item, "*") {
			return nil, "", fmt.Errorf("%s: %q: * must stand alone (for a repetition give its start, such as 0/15)", f.name, item)
		}
		spec, rep, hasRep := strings.Cut(item, "/")
		step := 0
		if hasRep {
			n, ok := atoi(rep)
			if !ok {
				return nil, "", fmt.Errorf("%s: repetition %q is not a number", f.name, "/"+rep)
			}
			if n < 1 {
				return nil, "", fmt.Errorf("%s: repetition /%s must be at least 1", f.name, rep)
			}
			step = n
		}
		lo, hi, isRange := strings.Cut(spec, "..")
		first, err := f.number(lo)
		if err != nil {
			return nil, "", err
		}
		last, text := first, f.format(first)
		if isRange {
			if last, err = f.number(hi); err != nil {
				return nil, "", err
			}
			if first > last {
				return nil, "", fmt.Errorf("%s range %s..%s is empty: its start is after its end", f.name, lo, hi)
			}
			text += ".." + f.format(last)
		}
		switch {
		case step > 0:
			if !isRange {
				last = f.max
			}
			step = min(step, f.max+1) // a larger one adds nothing, and cannot overflow
			for v := first; v <= last; v += step {
				values.add(v)
			}
			text += "/" + strconv.Itoa(step)
		default:
			for v := first; v <= last; v++ {
				values.add(v)
			}
		}
		normal = append(normal, text)
	}
	return values, strings.Join(normal, ","), nil
}

// number parses a value of the field.
func (f field) number(s string) (int, error) {
	n, ok := atoi(s)
	switch {
	case !ok:
		return 0, fmt.Errorf("%s: %q is not a number", f.name, s)
	case f.digits > 0 && len(s) != f.digits:
		return 0, fmt.Errorf("%s %q must have %d digits or be *", f.name, s, f.digits)
	case n < f.min || n > f.max:
		return 0, fmt.Errorf("%s value %s not in range %d..%d", f.name, s, f.min, f.max)
	}
	return n, nil
}

func (f field) format(n int) string {
	return fmt.Sprintf("%0*d", max(f.digits, 2), n)
}

// atoi parses decimal digits; a number too large for an int gives
// math.MaxInt.
func atoi(s string) (int, bool) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return math.MaxInt, true
	}
	return n, true
}

// weekdayNames lists the short names from Monday, as calendar events write
// weekdays.
var weekdayNames = [7]string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

// weekdayIndex returns the position of a day's short or full name in
// weekdayNames, ignoring case.
func weekdayIndex(name string) (int, error) {
	for i, short := range weekdayNames {
		full := time.Weekday((i + 1) % 7).String()
		if strings.EqualFold(name, short) || strings.EqualFold(name, full) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("weekday %q unknown (Mon..Sun or Monday..Sunday)", name)
}

// parseWeekdays parses a comma list of weekdays and ranges into a set of
// time.Weekday bits.
func parseWeekdays(s string) (uint8, error) {
	var days uint8
	for item := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(item, "..")
		first, err := weekdayIndex(lo)
		if err != nil {
			return 0, err
		}
		last := first
		if isRange {
			if last, err = weekdayIndex(hi); err != nil {
				return 0, err
			}
		}
		var these uint8
		for i := first; i != last; i = (i + 1) % 7 {
			these |= 1 << ((i + 1) % 7)
		}
		these |= 1 << ((last + 1) % 7)
		if first > last {
			return 0, fmt.Errorf("weekday range %s runs backwards (weeks start on Monday): write %s", item, formatWeekdays(these))
		}
		days |= these
	}
	return days, nil
}

// formatWeekdays writes days from Monday: runs of three or more as a range,
// other days one by one.
func formatWeekdays(days uint8) string {
	has := func(i int) bool { return days&(1<<((i+1)%7)) != 0 }
	var parts []string
	for i := 0; i < 7; i++ {
		if !has(i) {
			continue
		}
		j := i
		for j+1 < 7 && has(j+1) {
			j++
		}
		switch j - i {
		case 0:
			parts = append(parts, weekdayNames[i])
		case 1:
			parts = append(parts, weekdayNames[i], weekdayNames[j])
		default:
			parts = append(parts, weekdayNames[i]+".."+weekdayNames[j])
		}
		i = j
	}
	return strings.Join(parts, ",")
}

// parseZone loads an IANA time zone; "Local" is refused, since an event
// must fire at the same times on every host.
func parseZone(name string) (*time.Location, error) {
	if strings.EqualFold(name, "UTC") {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("unknown time zone %q: name the zone, such as Europe/Berlin", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	return loc, nil
}
