package fairness

import "slices"

// Concurrency limits. A limit caps the jobs executors hold (scheduled or
// running) at once: of one task across the cluster, of one group (a
// tenant may hold at most N slots), or of every group ('*', the default of
// groups without a limit of their own). Executors add their own cap per
// task (max-concurrent), sent with each claim.
//
// A claim reads the limits and the held counts under the fairness lock,
// so every coordinator enforces the same limits from the same counts. A
// limit only skips the jobs it caps: the claim goes on to the next
// eligible job in fair order, so a free slot is never left idle while
// another job it could run waits.

// AnyGroup is the name of the group limit that applies to every group
// without one of its own.
const AnyGroup = "*"

// Limits is what one claim may still take: per task, per group. -1 (or
// absent) is no limit.
type Limits struct {
	task         map[string]int
	group        map[string]int
	groupDefault int // -1: none
	held         map[string]int
	// Rates are the rate limits (nil: none).
	Rates *Rates
}

// NewLimits returns limits that limit nothing yet.
func NewLimits() *Limits {
	return &Limits{task: map[string]int{}, group: map[string]int{}, groupDefault: -1, held: map[string]int{}}
}

// ExecutorLimits are the executor's own task caps alone (no cluster
// limits exist); nil when it has none.
func ExecutorLimits(executorCaps map[string]int) *Limits {
	if len(executorCaps) == 0 {
		return nil
	}
	return NewLimits().WithExecutorCaps(executorCaps)
}

// SetTask records task's limit of maxRunning jobs, of which executors
// hold held.
func (l *Limits) SetTask(task string, maxRunning, held int) {
	l.task[task] = max(maxRunning-held, 0)
}

// SetGroup records group's limit of maxRunning jobs (group AnyGroup: of
// each group without one of its own).
func (l *Limits) SetGroup(group string, maxRunning int) {
	if group == AnyGroup {
		l.groupDefault = maxRunning
	} else {
		l.group[group] = maxRunning
	}
}

// SetHeld records that executors hold n jobs of group.
func (l *Limits) SetHeld(group string, n int) {
	l.held[group] = n
}

// WithExecutorCaps lowers the tasks' limits to the executor's caps.
func (l *Limits) WithExecutorCaps(executorCaps map[string]int) *Limits {
	for task, n := range executorCaps {
		if left, ok := l.task[task]; !ok || n < left {
			l.task[task] = max(n, 0)
		}
	}
	return l
}

// GroupLeft is how many more jobs group may take; -1: no limit.
func (l *Limits) GroupLeft(group string) int {
	limit, ok := l.group[group]
	if !ok {
		limit = l.groupDefault
	}
	if limit < 0 {
		return -1
	}
	return max(limit-l.held[group], 0)
}

// Allows says whether the claim may take c (l may be nil: no limits).
func (l *Limits) Allows(c Candidate) bool {
	if l == nil {
		return true
	}
	if left, ok := l.task[c.Task]; ok && left <= 0 {
		return false
	}
	return l.GroupLeft(c.Group) != 0 && (l.Rates.Empty() || l.Rates.Allows(c))
}

// Took counts c against the limits (l may be nil: no limits).
func (l *Limits) Took(c Candidate) {
	if l == nil {
		return
	}
	if left, ok := l.task[c.Task]; ok {
		l.task[c.Task] = left - 1
	}
	l.held[c.Group]++
	if !l.Rates.Empty() {
		l.Rates.Took(c)
	}
}

// Open returns the tasks not at their limit, and the groups that are (of
// those with a limit of their own, or holding jobs under the default).
func (l *Limits) Open(tasks []string) (open, capped []string) {
	for _, t := range tasks {
		if left, ok := l.task[t]; (!ok || left > 0) && !l.Rates.Spent("t:"+t) {
			open = append(open, t)
		}
	}
	for g := range l.group {
		if l.GroupLeft(g) == 0 {
			capped = append(capped, g)
		}
	}
	for g := range l.held {
		if _, own := l.group[g]; !own && l.GroupLeft(g) == 0 {
			capped = append(capped, g)
		}
	}
	capped = append(capped, l.Rates.SpentGroups()...)
	slices.Sort(capped)
	capped = slices.Compact(capped)
	return open, capped
}
