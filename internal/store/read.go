// Reading jobs: one, a page of them, a job's log, due times.

package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/analyze_jobs.sql
	analyzeJobsSQL string
)

// Get returns the job id of group. Ids are unique per group only: a job of
// another group is not found, whatever its id.
func (s *Store) Get(ctx context.Context, group, id string) (*fairway.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, "SELECT "+jobColumns+" FROM fairway_records_of($2, ARRAY[$1::text])", id, group))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fairway.NotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading job %s: %w", id, interpretError(err))
	}
	jobs := []fairway.Job{j}
	if err := s.MarkNoExecutor(ctx, jobs); err != nil {
		return nil, fmt.Errorf("reading job %s: %w", id, err)
	}
	return &jobs[0], nil
}

// ListParams filters List and ListJobs; empty fields match everything.
type ListParams struct {
	Group    string
	Task     string
	State    fairway.State
	Priority fairway.Priority
	// Since and Until bound the jobs' submission time (zero: unbounded).
	Since, Until time.Time
	// Text keeps jobs whose args or error contain it, ignoring case. It
	// reads every job the other filters leave: keep them narrow.
	Text string
	// Limit caps the result. Defaults to 100.
	Limit int
	// Cursor continues a ListJobs listing after the job it ended with.
	Cursor string
	// Full reads args and result too (ListJobs).
	Full bool
	// MaxBytes is how many bytes of args and result the caller means to
	// take at most (ListJobs, Full): queries read about that much. 0: no
	// hint.
	MaxBytes int
}

// Analyze refreshes the planner statistics of the job table (used after
// bulk loads, such as the scale benchmark's).
func (s *Store) Analyze(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, analyzeJobsSQL); err != nil {
		return fmt.Errorf("analyzing the records: %w", interpretError(err))
	}
	return nil
}
