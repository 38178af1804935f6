package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

// Rate limits: the rules (token buckets, and which jobs they pass over)
// are in internal/fairness (rates.go); this is the database part, which
// reads the limits and the buckets a claim needs into its fairness.Rates
// and writes back those it took from, and lists, sets and removes the
// limits.

var (
	//go:embed sql/rates_list.sql
	ratesListSQL string
	//go:embed sql/rates_set.sql
	ratesSetSQL string
	//go:embed sql/rates_delete.sql
	ratesDeleteSQL string
)

// RateLimits lists the rate limits.
func (s *Store) RateLimits(ctx context.Context) ([]fairway.RateLimit, error) {
	rows, err := s.pool.Query(ctx, ratesListSQL)
	if err != nil {
		return nil, fmt.Errorf("reading the rate limits: %w", interpretError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (fairway.RateLimit, error) {
		var l fairway.RateLimit
		var starts int
		var periodMS int64
		err := row.Scan(&l.Task, &l.Group, &starts, &periodMS, &l.Updated)
		l.Rate = fairway.FormatRate(starts, time.Duration(periodMS)*time.Millisecond)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the rate limits: %w", interpretError(err))
	}
	return out, nil
}

// SetRateLimit sets the rate limit of scope (task, group) to rate.
func (s *Store) SetRateLimit(ctx context.Context, task, group, rate string) error {
	starts, period, err := fairway.ParseRate(rate)
	if err != nil {
		return err
	}
	if task == "" && group == "" {
		return fairway.Invalid("scope", "missing: name a task, a group, or both")
	}
	if _, err := s.pool.Exec(ctx, ratesSetSQL, task, group, starts, period.Milliseconds()); err != nil {
		return fmt.Errorf("setting the rate limit of %s: %w", fairway.RateLimit{Task: task, Group: group}.Scope(), interpretError(err))
	}
	return nil
}

// DeleteRateLimit removes a rate limit; removing one that does not exist
// is not found.
func (s *Store) DeleteRateLimit(ctx context.Context, task, group string) error {
	tag, err := s.pool.Exec(ctx, ratesDeleteSQL, task, group)
	if err != nil {
		return fmt.Errorf("removing the rate limit of %s: %w", fairway.RateLimit{Task: task, Group: group}.Scope(), interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return &fairway.Error{Code: fairway.CodeNotFound, Field: "scope", Message: "no rate limit of " + fairway.RateLimit{Task: task, Group: group}.Scope()}
	}
	return nil
}
