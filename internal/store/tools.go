package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

// Reads and writes for Fairway's own tools, the benchmark (internal/bench)
// and the fault suite (internal/chaos): they reach the tables only through
// these, so that a schema change breaks them here, in the store's tests,
// and not silently in a tool run once a month.

var (
	//go:embed sql/tools_fill_history.sql
	toolsFillHistorySQL string
	//go:embed sql/move_job_rows.sql
	moveJobRowsSQL string
	//go:embed sql/tools_count_id_prefix.sql
	toolsCountIDPrefixSQL string
	//go:embed sql/tools_count_final.sql
	toolsCountFinalSQL string
	//go:embed sql/tools_outbox_len.sql
	toolsOutboxLenSQL string
	//go:embed sql/tools_job_attempts.sql
	toolsJobAttemptsSQL string
	//go:embed sql/tools_live_attempts.sql
	toolsLiveAttemptsSQL string
	//go:embed sql/tools_count_submitted_around.sql
	toolsCountSubmittedAroundSQL string
)

// HistoryPrefix starts the ids of the jobs FillHistory stores.
const HistoryPrefix = "h"

// FillHistory stores the finished jobs from..to (ids HistoryPrefix + i:
// successes of task "work" that ended two hours ago, in 1,000 groups
// named HistoryPrefix + i % 1000) as batches of records, without
// events, as years of use would leave them: the benchmark's history.
func (s *Store) FillHistory(ctx context.Context, from, to int64) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, toolsFillHistorySQL, from, to, HistoryPrefix); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, moveJobRowsSQL)
		return err
	})
	if err != nil {
		return fmt.Errorf("storing finished jobs: %w", interpretError(err))
	}
	return nil
}

// CountJobsWithPrefix counts the jobs whose id starts with prefix, in any
// group and state; "" counts them all.
func (s *Store) CountJobsWithPrefix(ctx context.Context, prefix string) (int, error) {
	return s.count(ctx, toolsCountIDPrefixSQL, prefix)
}

// CountFinal counts the jobs of ids (in any group) that are in a final
// state.
func (s *Store) CountFinal(ctx context.Context, ids []string) (int, error) {
	return s.count(ctx, toolsCountFinalSQL, ids)
}

// OutboxLen counts the events written and not yet published.
func (s *Store) OutboxLen(ctx context.Context) (int, error) {
	return s.count(ctx, toolsOutboxLenSQL)
}

// CountSubmittedAround counts the jobs of group submitted before at, and
// at or after it.
func (s *Store) CountSubmittedAround(ctx context.Context, group string, at time.Time) (before, after int, err error) {
	if err := s.pool.QueryRow(ctx, toolsCountSubmittedAroundSQL, group, at).Scan(&before, &after); err != nil {
		return 0, 0, interpretError(err)
	}
	return before, after, nil
}

// JobAttempts is a job's state and attempts, for the fault suite's
// accounting.
type JobAttempts struct {
	ID      string
	State   fairway.State
	Attempt int // attempts begun
	Retries int // failed attempts so far
}

// AllJobAttempts returns every job's state and attempts, in any group,
// on either engine: the unfinished jobs (fairway_live), then the records,
// which win for a job that ended between the two reads.
func (s *Store) AllJobAttempts(ctx context.Context) ([]JobAttempts, error) {
	live, err := s.jobAttempts(ctx, toolsLiveAttemptsSQL)
	if err != nil {
		return nil, err
	}
	records, err := s.jobAttempts(ctx, toolsJobAttemptsSQL)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(records))
	for _, j := range records {
		seen[j.ID] = true
	}
	for _, j := range live {
		if !seen[j.ID] {
			records = append(records, j)
		}
	}
	return records, nil
}

func (s *Store) jobAttempts(ctx context.Context, sql string) ([]JobAttempts, error) {
	rows, err := s.pool.Query(ctx, sql)
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (JobAttempts, error) {
		var j JobAttempts
		err := row.Scan(&j.ID, &j.State, &j.Attempt, &j.Retries)
		return j, err
	})
	return out, interpretError(err)
}

func (s *Store) count(ctx context.Context, sql string, args ...any) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return 0, interpretError(err)
	}
	return n, nil
}
