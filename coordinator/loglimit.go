package coordinator

import (
	"log/slog"
	"sync"
	"time"
)

// logLimit lets through at most max lines a second of a kind that a sender
// can make as many of as it likes (a rejected submission), and says how
// many it held back: a flood of bad submissions cannot flood the log.
type logLimit struct {
	max int
	now func() time.Time

	mu      sync.Mutex
	window  time.Time // the second being counted
	passed  int
	dropped int
}

func newLogLimit(max int) *logLimit { return &logLimit{max: max, now: time.Now} }

// allow says whether a line may be logged now. When a new second begins
// after lines were held back, it first logs, on log, how many.
func (l *logLimit) allow(log *slog.Logger, what string) bool {
	l.mu.Lock()
	now := l.now()
	var dropped int
	if now.Sub(l.window) >= time.Second {
		dropped = l.dropped
		l.window, l.passed, l.dropped = now, 0, 0
	}
	ok := l.passed < l.max
	if ok {
		l.passed++
	} else {
		l.dropped++
	}
	l.mu.Unlock()
	if dropped > 0 {
		log.Info(what+": more were not logged", "not_logged", dropped, "at_most_per_second", l.max)
	}
	return ok
}
