package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parseDays is time.ParseDuration that also takes whole days before the
// rest: 7d, 1d12h, 2d30m, as well as 36h or 30m; a sign may lead.
func parseDays(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a duration (examples: 7d, 1d12h, 36h, 30m)", s)
	text, neg := s, false
	if rest, ok := strings.CutPrefix(text, "-"); ok {
		text, neg = rest, true
	} else {
		text = strings.TrimPrefix(text, "+")
	}
	var d time.Duration
	hasDays := false
	if i := strings.IndexByte(text, 'd'); i > 0 && strings.Trim(text[:i], "0123456789") == "" {
		days, err := strconv.Atoi(text[:i])
		if err != nil || days > 100*365 {
			return 0, bad
		}
		d, text, hasDays = time.Duration(days)*24*time.Hour, text[i+1:], true
	}
	if text != "" || !hasDays {
		rest, err := time.ParseDuration(text)
		if err != nil || rest < 0 || strings.HasPrefix(text, "+") {
			return 0, bad
		}
		d += rest
	}
	if neg {
		d = -d
	}
	return d, nil
}

// daysValue is a flag of a duration that may be given in days (parseDays).
// It keeps the text given, to say it back.
type daysValue struct {
	d    *time.Duration
	text string
}

func newDaysValue(d *time.Duration) *daysValue { return &daysValue{d: d} }

func (v *daysValue) Set(s string) error {
	d, err := parseDays(s)
	if err != nil {
		return err
	}
	*v.d, v.text = d, s
	return nil
}

func (v *daysValue) String() string {
	if v.text != "" {
		return v.text
	}
	if v.d == nil || *v.d == 0 {
		return "0"
	}
	return v.d.String()
}

func (v *daysValue) Type() string { return "duration" }
