package store

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

// Rate limits: at most N job starts (claims) per period of a task across
// the cluster, of a group, or of a task in a group, as token buckets of
// N tokens refilled at N per period. A claim reads the limits with the
// concurrency limits and the buckets it needs under the fairness lock, and
// writes back those it took from before it commits, so every coordinator
// counts from the same buckets. A job whose bucket is empty is passed
// over like a job at its concurrency limit: the claim goes on to the next
// eligible job in fair order, and a slot is never left idle while another
// job it could run waits.

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

// rateLimit is one rate limit: starts per period of task ("" any) in
// group ("" the whole cluster, "*" each group without one of its own).
type rateLimit struct {
	task, group string
	starts      float64
	period      time.Duration
}

// rates is what a claim knows of the rate limits: the limits, and the
// buckets it read (tokens now) or took from.
type rates struct {
	task      map[string]rateLimit    // a task's, over the cluster
	group     map[string]rateLimit    // a group's ("*": each group's)
	taskGroup map[[2]string]rateLimit // a task's in a group (group "*": each group's)
	tokens    map[string]float64      // by bucket key, as of asof
	asof      map[string]time.Time    // when each bucket was read (PostgreSQL's clock)
	taken     map[string]bool         // buckets to write back
	// blocked: a job was passed over for a rate. The limits make a claim
	// find work later that no change will announce: the coordinators wake
	// the executors then (RateWait).
	blocked bool
}

// RatesInUse says whether the last claim found rate limits in force: then
// a job passed over for its rate becomes eligible as its bucket refills,
// which no change announces, and the coordinators try their waiting
// dispatch requests again now and then (RateRetry).
func (s *Store) RatesInUse() bool { return s.ratesInUse.Load() }

// RateRetry is how often the coordinators try their waiting dispatch
// requests again while rate limits are in force.
const RateRetry = 50 * time.Millisecond

func newRates() *rates {
	return &rates{task: map[string]rateLimit{}, group: map[string]rateLimit{}, taskGroup: map[[2]string]rateLimit{},
		tokens: map[string]float64{}, asof: map[string]time.Time{}, taken: map[string]bool{}}
}

func (r *rates) empty() bool {
	return r == nil || len(r.task)+len(r.group)+len(r.taskGroup) == 0
}

// readRates reads claim_rates.sql's rows.
func readRates(rows pgx.Rows) (*rates, error) {
	r := newRates()
	var l rateLimit
	var starts int
	var periodMS int64
	_, err := pgx.ForEachRow(rows, []any{&l.task, &l.group, &starts, &periodMS}, func() error {
		l.starts, l.period = float64(starts), time.Duration(periodMS)*time.Millisecond
		switch {
		case l.group == "":
			r.task[l.task] = l
		case l.task == "":
			r.group[l.group] = l
		default:
			r.taskGroup[[2]string{l.task, l.group}] = l
		}
		return nil
	})
	return r, err
}

// applying returns the limits that count a job of task in group, with
// their buckets' keys: the task's, the group's (its own, or each
// group's), the task's in the group (its own, or in each group).
func (r *rates) applying(task, group string) (out [3]rateLimit, keys [3]string, n int) {
	if r.empty() {
		return out, keys, 0
	}
	add := func(l rateLimit, key string) {
		out[n], keys[n] = l, key
		n++
	}
	if l, ok := r.task[task]; ok {
		add(l, "t:"+task)
	}
	if l, ok := r.group[group]; ok {
		add(l, "g:"+group)
	} else if l, ok := r.group[AnyGroup]; ok {
		add(l, "g:"+group)
	}
	if l, ok := r.taskGroup[[2]string{task, group}]; ok {
		add(l, "tg:"+task+":"+group)
	} else if l, ok := r.taskGroup[[2]string{task, AnyGroup}]; ok {
		add(l, "tg:"+task+":"+group)
	}
	return out, keys, n
}

// unread returns the keys of the buckets that jobs of tasks in groups
// count against and that this claim has not read yet.
func (r *rates) unread(groups, tasks []string) []string {
	if r.empty() {
		return nil
	}
	seen := map[string]bool{}
	var keys []string
	for _, g := range groups {
		for _, t := range tasks {
			_, ks, n := r.applying(t, g)
			for _, k := range ks[:n] {
				if _, known := r.tokens[k]; !known && !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
		}
	}
	return keys
}

// readBuckets reads claim_rate_buckets.sql's rows: each bucket's
// tokens refilled to the time of the read; a bucket never taken from is
// full.
func (r *rates) readBuckets() func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		var key string
		var tokens *float64
		var elapsed *float64
		var asof time.Time
		_, err := pgx.ForEachRow(rows, []any{&key, &tokens, &elapsed, &asof}, func() error {
			l := r.limitOfKey(key)
			r.asof[key] = asof
			if tokens == nil || elapsed == nil {
				r.tokens[key] = l.starts
				return nil
			}
			r.tokens[key] = math.Min(l.starts, *tokens+max(*elapsed, 0)*l.starts/l.period.Seconds())
			return nil
		})
		return err
	}
}

// limitOfKey is the limit whose bucket key is k.
func (r *rates) limitOfKey(k string) rateLimit {
	kind, rest, _ := strings.Cut(k, ":")
	switch kind {
	case "t":
		return r.task[rest]
	case "g":
		if l, ok := r.group[rest]; ok {
			return l
		}
		return r.group[AnyGroup]
	default:
		task, group, _ := strings.Cut(rest, ":")
		if l, ok := r.taskGroup[[2]string{task, group}]; ok {
			return l
		}
		return r.taskGroup[[2]string{task, AnyGroup}]
	}
}

// allows says whether every bucket counting c has a token.
func (r *rates) allows(c candidate) bool {
	_, keys, n := r.applying(c.task, c.group)
	for _, k := range keys[:n] {
		if r.tokens[k] < 1 {
			r.blocked = true
			return false
		}
	}
	return true
}

// spent says whether the bucket key is known to be empty.
func (r *rates) spent(key string) bool {
	if r.empty() {
		return false
	}
	tokens, known := r.tokens[key]
	return known && tokens < 1
}

// spentGroups are the groups whose own bucket is empty: the walk steps
// over them.
func (r *rates) spentGroups() []string {
	if r.empty() {
		return nil
	}
	var out []string
	for k, tokens := range r.tokens {
		if g, ok := strings.CutPrefix(k, "g:"); ok && tokens < 1 {
			out = append(out, g)
		}
	}
	return out
}

// took takes a token of each bucket counting c.
func (r *rates) took(c candidate) {
	_, keys, n := r.applying(c.task, c.group)
	for _, k := range keys[:n] {
		r.tokens[k]--
		r.taken[k] = true
	}
}

// save queues the write of the buckets taken from (r may be nil).
func (r *rates) save(b *pgx.Batch) {
	if r.empty() || len(r.taken) == 0 {
		return
	}
	keys := make([]string, 0, len(r.taken))
	tokens := make([]float64, 0, len(r.taken))
	asof := make([]time.Time, 0, len(r.taken))
	for k := range r.taken {
		keys, tokens, asof = append(keys, k), append(tokens, r.tokens[k]), append(asof, r.asof[k])
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
