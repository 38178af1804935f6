package fairway

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// CountingScheme is Docspell's "H,L": take H high-priority jobs, then L
// low-priority ones, then start over. Fair selection (internal/fairness,
// in the journal leader's claims) asks it which priority to prefer at each
// step.
type CountingScheme struct{ High, Low int }

// At returns the priority the scheme asks for at position n of the global
// sequence.
func (c CountingScheme) At(n int64) Priority {
	cycle := int64(c.High + c.Low)
	if cycle <= 0 || n%cycle < int64(c.High) {
		return PriorityHigh
	}
	return PriorityLow
}

// String returns the scheme as "H,L", e.g. "4,1".
func (c CountingScheme) String() string { return fmt.Sprintf("%d,%d", c.High, c.Low) }

// ParseCountingScheme parses "H,L": two non-negative integers, not both 0.
func ParseCountingScheme(s string) (CountingScheme, error) {
	hs, ls, ok := strings.Cut(s, ",")
	if !ok {
		return CountingScheme{}, errors.New(`not a counting scheme "H,L" (example: 4,1)`)
	}
	h, errH := strconv.Atoi(strings.TrimSpace(hs))
	l, errL := strconv.Atoi(strings.TrimSpace(ls))
	switch {
	case errH != nil || errL != nil:
		return CountingScheme{}, errors.New(`not a counting scheme "H,L" (example: 4,1)`)
	case h < 0 || l < 0:
		return CountingScheme{}, errors.New("counts must not be negative")
	case h == 0 && l == 0:
		return CountingScheme{}, errors.New("counts must not both be 0")
	}
	return CountingScheme{High: h, Low: l}, nil
}
