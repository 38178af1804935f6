package store

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
	"github.com/jackc/pgx/v5"
)

// Concurrency limits: the rules (what a claim may take under them) are in
// internal/fairness (limits.go); this is the database part, which reads
// the limits and the held counts into a claim's fairness.Limits (with the
// executor's own caps, ClaimParams.TaskLimits), and lists, sets and
// removes the limits.

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
	AnyGroup = fairness.AnyGroup
)

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
