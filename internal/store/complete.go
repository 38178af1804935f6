package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/extend_leases.sql
	extendLeasesSQL string
	//go:embed sql/lease_expired_jobs.sql
	leaseExpiredJobsSQL string
)

var (
	//go:embed sql/complete.sql
	completeSQL string
	//go:embed sql/mark_running.sql
	markRunningSQL string
)

// Attempt names one run of a job by one executor instance.
type Attempt struct {
	Group   string
	JobID   string
	Attempt int
	// Executor is the executor's app-id, Instance the instance of it that
	// holds the attempt ('' when the claim named none).
	Executor string
	Instance string
}

// Outcome is how an attempt ended.
type Outcome struct {
	Attempt
	Kind   fairway.Outcome
	Result []byte
	Error  string
	// StartedAt, when set, is when the attempt started: its start was
	// reported along with its end, and is recorded with it.
	StartedAt *time.Time
	// Snooze is how long a snoozed job waits before it is due again.
	Snooze time.Duration
	// RanMS is how long the attempt ran, as its executor measured it (0:
	// not said), which the journal's shares learn (the row engine learns
	// it through LearnRunTimes).
	RanMS float64
}

// Applied is an outcome that changed its job.
type Applied struct {
	Group string
	JobID string
	State fairway.State
	// RunAt is when a waiting or stuck job becomes due.
	RunAt time.Time
	// NoDependents is true when no job depends on this one (as Complete
	// knows): its end needs no resolution of dependents. False means
	// "some may": the statements that do not say leave it false.
	NoDependents bool
}

// Start is an executor's report that an attempt started.
type Start struct {
	Attempt
	// At is when the attempt started, by the executor's clock (zero: not
	// said; now). It is kept within the attempt's claim and now: an
	// executor's clock ahead or behind, or a false time, cannot make an
	// attempt start before its job was handed out or after the report.
	// An executor reports a start some 25 ms after it (a shorter job's
	// start goes with its end), so the time of the report is late.
	At time.Time
}

// MarkRunning records that executors started attempts. Reports about
// attempts that are no longer current, or that come from another executor
// instance than the one holding the attempt, change nothing.
func (s *Store) MarkRunning(ctx context.Context, started []Start) error {
	if len(started) == 0 {
		return nil
	}
	atts := make([]Attempt, len(started))
	at := make([]*time.Time, len(started))
	for i, st := range started {
		atts[i] = st.Attempt
		if !st.At.IsZero() {
			at[i] = &started[i].At
		}
	}
	a := attemptArrays(atts)
	err := againOnConflict(func() error {
		_, err := s.pool.Exec(ctx, markRunningSQL, a.ids, a.attempts, a.executors, a.groups, a.instances, at)
		return err
	})
	if err != nil {
		return fmt.Errorf("marking %d jobs running: %w", len(started), interpretError(err))
	}
	return nil
}

// Complete applies outcomes. An outcome applies only if its attempt is the
// job's current one and still held by that executor instance; the result
// lists those that applied, in order of application.
//
// Each round is one transaction. complete.sql takes no row lock: an
// outcome whose job changed under it (a start recorded, a cancel
// requested) is applied again in the next round, which sees the change.
// That takes a race with another writer of the same job, so a round
// rarely has more than a few; after maxCompleteRounds the outcomes left are
// an unavailable error (the results service hands the reports back to
// JetStream, which delivers them again; the outcomes applied meanwhile
// change nothing the second time). With an error, Complete also returns
// what earlier rounds applied: those are committed, and their follow-ups
// (dependents, due times) are the caller's to run.
func (s *Store) Complete(ctx context.Context, outcomes []Outcome, retryDelay time.Duration) ([]Applied, error) {
	return completeRounds(outcomes, func(left []Outcome) ([]Applied, []int, error) {
		// One round trip: the statement, pinned to its generic plan. Left
		// to choose, PostgreSQL plans it anew for every call (its custom
		// plans look cheaper than the generic one), which cost 375 us a
		// call, more than running it, on the path from a job's end to its
		// event; the generic plan looks jobs up by primary key as well
		// (TestReportBatchesFindJobsByPrimaryKey).
		var applied []Applied
		var raced []int
		err := s.batchTx(ctx, func(b *pgx.Batch) {
			b.Queue("SET LOCAL plan_cache_mode = force_generic_plan")
			sql, args := completeArgs(left, retryDelay)
			b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
				var err error
				applied, raced, err = collectCompleted(rows)
				return err
			})
		})
		return applied, raced, err
	})
}

// maxCompleteRounds is how many rounds Complete gives the outcomes whose
// jobs changed under them.
const maxCompleteRounds = 10

// completeRounds applies outcomes with round, again for those it returns
// as raced (indexes into the slice it was given), up to maxCompleteRounds
// times.
func completeRounds(outcomes []Outcome, round func([]Outcome) ([]Applied, []int, error)) ([]Applied, error) {
	var all []Applied
	for range maxCompleteRounds {
		if len(outcomes) == 0 {
			return all, nil
		}
		applied, raced, err := round(outcomes)
		if conflicted(err) {
			continue // nothing of the round committed: all of them again
		}
		if err != nil {
			return all, fmt.Errorf("completing %d jobs: %w", len(outcomes), err)
		}
		all = append(all, applied...)
		left := make([]Outcome, len(raced))
		for i, r := range raced {
			left[i] = outcomes[r]
		}
		outcomes = left
	}
	if len(outcomes) > 0 {
		// Unavailable: nothing is wrong with the outcomes, so the results
		// service hands them back for later rather than looking for a
		// poison among them.
		return all, &fairway.Error{Code: fairway.CodeUnavailable, Message: fmt.Sprintf(
			"completing %d jobs: their rows changed under each of %d tries; try again", len(outcomes), maxCompleteRounds)}
	}
	return all, nil
}

// complete applies outcomes of attempts whose rows tx has locked (the
// lease sweep's and a restart's selection): nothing can change them under
// the statement, so one round does.
func complete(ctx context.Context, tx pgx.Tx, outcomes []Outcome, retryDelay time.Duration) ([]Applied, error) {
	sql, args := completeArgs(outcomes, retryDelay)
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	applied, _, err := collectCompleted(rows)
	return applied, err
}

// completeArgs is complete.sql with its arguments for outcomes.
func completeArgs(outcomes []Outcome, retryDelay time.Duration) (string, []any) {
	n := len(outcomes)
	atts := make([]Attempt, n)
	kinds, errs := make([]string, n), make([]string, n)
	results := make([][]byte, n)
	started := make([]*time.Time, n)
	snoozes := make([]float64, n)
	for i, o := range outcomes {
		atts[i], kinds[i], results[i], errs[i], started[i] = o.Attempt, string(o.Kind), o.Result, o.Error, o.StartedAt
		snoozes[i] = o.Snooze.Seconds()
	}
	a := attemptArrays(atts)
	return completeSQL, []any{a.ids, a.attempts, a.executors, kinds, results, errs, interval(retryDelay), started, a.groups, a.instances, snoozes}
}

// collectCompleted reads what complete.sql returns: the outcomes that
// applied, and the indexes of those that raced (found applicable, not
// applied: their jobs changed under the statement).
func collectCompleted(rows pgx.Rows) (applied []Applied, raced []int, err error) {
	var considered bool
	var group, id, state *string
	var runAt *time.Time
	var dependents *bool
	var ord int64
	done := map[int64]bool{}
	_, err = pgx.ForEachRow(rows, []any{&considered, &group, &id, &state, &runAt, &dependents, &ord}, func() error {
		switch {
		case !considered:
			applied = append(applied, Applied{Group: *group, JobID: *id, State: fairway.State(*state), RunAt: *runAt, NoDependents: !*dependents})
			done[ord] = true
		case !done[ord]:
			raced = append(raced, int(ord-1))
		}
		return nil
	})
	return applied, raced, err
}

// collectApplied reads rows of (group_name, id, state, run_at).
func collectApplied(rows pgx.Rows) ([]Applied, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Applied, error) {
		var a Applied
		err := row.Scan(&a.Group, &a.JobID, &a.State, &a.RunAt)
		return a, err
	})
}

// attemptColumns are attempts as the array parameters of a statement.
type attemptColumns struct {
	groups, ids, executors, instances []string
	attempts                          []int32
}

func attemptArrays(as []Attempt) attemptColumns {
	n := len(as)
	c := attemptColumns{groups: make([]string, n), ids: make([]string, n), executors: make([]string, n),
		instances: make([]string, n), attempts: make([]int32, n)}
	for i, a := range as {
		c.groups[i], c.ids[i], c.attempts[i], c.executors[i], c.instances[i] = a.Group, a.JobID, int32(a.Attempt), a.Executor, a.Instance //nolint:gosec // G115: attempts count from 0 to max_retries+1, at most 101
	}
	return c
}

// ExpireLeases ends as lost the attempts whose lease ran out while their
// executor went silent too (no heartbeat for a lease): it died or lost its
// connection. Each counts as a failed attempt, and the job is due again at
// once, or failed when its retries are used up. An attempt whose executor
// still sends heartbeats is left alone a while longer, since its end may be
// waiting in the report stream behind others (an overloaded coordinator);
// after lease × staleLeaseFactor it is expired all the same (say, a dispatch
// reply that never reached the executor). It handles at most limit jobs
// per call and returns what it changed.
func (s *Store) ExpireLeases(ctx context.Context, limit int, lease, retryDelay time.Duration) ([]Applied, error) {
	return s.loseAttempts(ctx, leaseExpiredJobsSQL, retryDelay, "executor lost: its lease expired without a heartbeat",
		limit, interval(lease), interval(lease*(staleLeaseFactor-1)))
}

// staleLeaseFactor: an attempt whose executor is alive but does not hold
// it any more is expired after this many leases.
const staleLeaseFactor = 3

func (s *Store) loseAttempts(ctx context.Context, query string, retryDelay time.Duration, reason string, args ...any) ([]Applied, error) {
	var applied []Applied
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		applied, err = loseAttempts(ctx, tx, query, retryDelay, reason, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("releasing lost jobs: %w", err)
	}
	return applied, nil
}

func loseAttempts(ctx context.Context, tx pgx.Tx, query string, retryDelay time.Duration, reason string, args ...any) ([]Applied, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	lost, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Outcome, error) {
		o := Outcome{Kind: fairway.OutcomeLost, Error: reason}
		err := row.Scan(&o.Group, &o.JobID, &o.Attempt.Attempt, &o.Executor, &o.Instance)
		return o, err
	})
	if err != nil || len(lost) == 0 {
		return nil, err
	}
	return complete(ctx, tx, lost, retryDelay)
}

// MaxHold bounds how long an executor holds a job handed to it before it
// starts it, whatever it heartbeats: an executor holds jobs beyond its
// slots only when they are short (executor.Config.Prefetch), so a job held
// this long is held by an executor that does not run it.
const MaxHold = time.Hour

// ExtendLeases renews the leases of the jobs an executor instance says it
// holds; jobs held by another instance keep theirs. A lease is never
// renewed past a running job's start + timeout (fairway.MaxTimeout for a
// job without one) + 2 × lease, nor past a held job's hand-over + MaxHold.
func (s *Store) extendLeases(ctx context.Context, executor, instance string, jobs []fairway.JobRef, lease time.Duration) error {
	if len(jobs) == 0 {
		return nil
	}
	groups, ids := make([]string, len(jobs)), make([]string, len(jobs))
	for i, j := range jobs {
		groups[i], ids[i] = j.Group, j.ID
	}
	_, err := s.pool.Exec(ctx, extendLeasesSQL,
		executor, ids, interval(lease), instance, groups, interval(s.maxHold), interval(fairway.MaxTimeout))
	if err != nil {
		return fmt.Errorf("extending leases of %q: %w", executor, interpretError(err))
	}
	return nil
}
