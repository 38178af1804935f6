package store

import (
	"context"
	_ "embed"
	"fmt"
	"slices"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

// Concurrency limits. A limit caps the jobs executors hold (scheduled or
// running) at once: of one task across the cluster, of one group (a
// tenant may hold at most N slots), or of every group ('*', the default of
// groups without a limit of their own). Executors add their own cap per
// task (max-concurrent), sent with each claim (ClaimParams.TaskLimits).
//
// A claim reads the limits and the held counts under the fairness lock,
// so every coordinator enforces the same limits from the same counts. A
// limit only skips the jobs it caps: the claim goes on to the next
// eligible job in fair order, so a free slot is never left idle while
// another job it could run waits.

var (
	//go:embed sql/limits_list.sql
	limitsListSQL string
	//go:embed sql/limits_set.sql
	limitsSetSQL string
	//go:embed sql/limits_delete.sql
	limitsDeleteSQL string
)

// Limit kinds.
const (
	LimitTask  = "task"
	LimitGroup = "group"
	// AnyGroup is the name of the group limit that applies to every group
	// without one of its own.
	AnyGroup = "*"
)

// limits is what one claim may still take: per task, per group. -1 (or
// absent) is no limit.
type limits struct {
	task         map[string]int
	group        map[string]int
	groupDefault int // -1: none
	held         map[string]int
	rates        *rates // nil: none
}

// readLimits reads claim_limits.sql's rows, with the executor's own task
// caps; nil when there are none of either.
func readLimits(rows pgx.Rows, executorCaps map[string]int) (*limits, error) {
	l := newLimits()
	var kind, name string
	var maxRunning, held int
	if _, err := pgx.ForEachRow(rows, []any{&kind, &name, &maxRunning, &held}, func() error {
		switch kind {
		case LimitTask:
			l.task[name] = max(maxRunning-held, 0)
		case LimitGroup:
			if name == AnyGroup {
				l.groupDefault = maxRunning
			} else {
				l.group[name] = maxRunning
			}
		case "held":
			l.held[name] = held
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return l.withExecutorCaps(executorCaps), nil
}

// executorLimits are the executor's own task caps alone (no cluster
// limits exist); nil when it has none.
func executorLimits(executorCaps map[string]int) *limits {
	if len(executorCaps) == 0 {
		return nil
	}
	return newLimits().withExecutorCaps(executorCaps)
}

func newLimits() *limits {
	return &limits{task: map[string]int{}, group: map[string]int{}, groupDefault: -1, held: map[string]int{}}
}

// withExecutorCaps lowers the tasks' limits to the executor's caps.
func (l *limits) withExecutorCaps(executorCaps map[string]int) *limits {
	for task, n := range executorCaps {
		if left, ok := l.task[task]; !ok || n < left {
			l.task[task] = max(n, 0)
		}
	}
	return l
}

// LimitsInUse says whether the last claim found concurrency limits in
// force: then a job that ends may free a slot that an idle executor is
// waiting for, and the coordinators wake the executors.
func (s *Store) LimitsInUse() bool { return s.limitsInUse.Load() }

// groupLeft is how many more jobs group may take; -1: no limit.
func (l *limits) groupLeft(group string) int {
	limit, ok := l.group[group]
	if !ok {
		limit = l.groupDefault
	}
	if limit < 0 {
		return -1
	}
	return max(limit-l.held[group], 0)
}

// allows says whether the claim may take c.
func (l *limits) allows(c candidate) bool {
	if l == nil {
		return true
	}
	if left, ok := l.task[c.task]; ok && left <= 0 {
		return false
	}
	return l.groupLeft(c.group) != 0 && (l.rates.empty() || l.rates.allows(c))
}

// took counts c against the limits.
func (l *limits) took(c candidate) {
	if l == nil {
		return
	}
	if left, ok := l.task[c.task]; ok {
		l.task[c.task] = left - 1
	}
	l.held[c.group]++
	if !l.rates.empty() {
		l.rates.took(c)
	}
}

// open returns the tasks not at their limit, and the groups that are (of
// those with a limit of their own, or holding jobs under the default).
func (l *limits) open(tasks []string) (open, capped []string) {
	for _, t := range tasks {
		if left, ok := l.task[t]; (!ok || left > 0) && !l.rates.spent("t:"+t) {
			open = append(open, t)
		}
	}
	for g := range l.group {
		if l.groupLeft(g) == 0 {
			capped = append(capped, g)
		}
	}
	for g := range l.held {
		if _, own := l.group[g]; !own && l.groupLeft(g) == 0 {
			capped = append(capped, g)
		}
	}
	capped = append(capped, l.rates.spentGroups()...)
	slices.Sort(capped)
	capped = slices.Compact(capped)
	return open, capped
}

// Limits returns the concurrency limits, with how many jobs each limit's
// task or group holds now.
func (s *Store) Limits(ctx context.Context) ([]fairway.Limit, error) {
	rows, err := s.pool.Query(ctx, limitsListSQL)
	if err != nil {
		return nil, fmt.Errorf("reading the limits: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (fairway.Limit, error) {
		var l fairway.Limit
		err := row.Scan(&l.Kind, &l.Name, &l.Max, &l.Held, &l.Updated)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the limits: %w", interpretError(err))
	}
	return out, nil
}

// SetLimit sets a concurrency limit: at most max jobs of task name (kind
// "task") or of group name (kind "group"; "*" for every group without a
// limit of its own) held by executors at once. max 0 stops new claims of
// them; running jobs finish.
func (s *Store) SetLimit(ctx context.Context, kind, name string, max int) error {
	if err := checkLimit(kind, name); err != nil {
		return err
	}
	if max < 0 {
		return fairway.Invalid("max", "%d is negative: use 0 to stop claims, or remove the limit", max)
	}
	if _, err := s.pool.Exec(ctx, limitsSetSQL, kind, name, max); err != nil {
		return fmt.Errorf("setting the %s limit of %s: %w", kind, name, interpretError(err))
	}
	return nil
}

// DeleteLimit removes a concurrency limit; removing one that does not
// exist is not found.
func (s *Store) DeleteLimit(ctx context.Context, kind, name string) error {
	if err := checkLimit(kind, name); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, limitsDeleteSQL, kind, name)
	if err != nil {
		return fmt.Errorf("removing the %s limit of %s: %w", kind, name, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return &fairway.Error{Code: fairway.CodeNotFound, Field: "name", Message: fmt.Sprintf("no %s limit for %q", kind, name)}
	}
	return nil
}

func checkLimit(kind, name string) error {
	switch kind {
	case LimitTask:
		return fairway.CheckName("name", name)
	case LimitGroup:
		if name == AnyGroup {
			return nil
		}
		return fairway.CheckName("name", name)
	}
	return fairway.Invalid("kind", "unknown kind %q: use task or group", kind)
}
