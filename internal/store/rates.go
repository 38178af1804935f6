package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
	"github.com/jackc/pgx/v5"
)

// Rate limits: the rules (token buckets, and which jobs they pass over)
// are in internal/fairness (rates.go); this is the database part, which
// reads the limits and the buckets a claim needs into its fairness.Rates
// and writes back those it took from, and lists, sets and removes the
// limits.

var (
	//go:embed sql/claim_rates.sql
	claimRatesSQL string
	//go:embed sql/claim_rate_buckets.sql
	claimRateBucketsSQL string
	//go:embed sql/claim_rate_save.sql
	claimRateSaveSQL string
	//go:embed sql/rates_list.sql
	ratesListSQL string
	//go:embed sql/rates_set.sql
	ratesSetSQL string
	//go:embed sql/rates_delete.sql
	ratesDeleteSQL string
)

// RatesInUse says whether the last claim found rate limits in force: then
// a job passed over for its rate becomes eligible as its bucket refills,
// which no change announces, and the coordinators try their waiting
// dispatch requests again now and then (RateRetry).
func (s *Store) RatesInUse() bool { return s.ratesInUse.Load() }

// RateRetry is how often the coordinators try their waiting dispatch
// requests again while rate limits are in force.
const RateRetry = 50 * time.Millisecond

// readRates reads claim_rates.sql's rows.
func readRates(rows pgx.Rows) (*fairness.Rates, error) {
	r := fairness.NewRates()
	var l fairness.RateLimit
	var starts int
	var periodMS int64
	_, err := pgx.ForEachRow(rows, []any{&l.Task, &l.Group, &starts, &periodMS}, func() error {
		l.Starts, l.Period = float64(starts), time.Duration(periodMS)*time.Millisecond
		r.Add(l)
		return nil
	})
	return r, err
}

// readBuckets reads claim_rate_buckets.sql's rows into r: each bucket's
// tokens refilled to the time of the read; a bucket never taken from is
// full.
func readBuckets(r *fairness.Rates) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		var key string
		var tokens *float64
		var elapsed *float64
		var asof time.Time
		_, err := pgx.ForEachRow(rows, []any{&key, &tokens, &elapsed, &asof}, func() error {
			r.Read(key, tokens, elapsed, asof)
			return nil
		})
		return err
	}
}

// saveRates queues the write of the buckets taken from (r may be nil).
func saveRates(b *pgx.Batch, r *fairness.Rates) {
	keys, tokens, asof := r.Taken()
	if len(keys) == 0 {
		return
	}
	b.Queue(claimRateSaveSQL, keys, tokens, asof)
}

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
