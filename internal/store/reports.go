// What executors report about the attempts they hold, besides their
// ends (attempt.go: Outcome): log lines, progress, and results PostgreSQL refuses.

package store

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/append_logs.sql
	appendLogsSQL string
	//go:embed sql/append_held_logs.sql
	appendHeldLogsSQL string
	//go:embed sql/unstorable_json.sql
	unstorableJsonSQL string
)

// AttemptLog is log lines that the executor instance holding an attempt
// reported about it.
type AttemptLog struct {
	Attempt
	Lines []fairway.LogLine
}

// AppendLogs stores log lines of attempts. Lines apply only while their
// attempt is the job's latest, and only from the executor instance that
// holds (or held) it; the others are dropped: a late line from an older
// attempt, or lines that another executor forged.
func (s *Store) AppendLogs(ctx context.Context, logs []AttemptLog) error {
	return s.appendLogs(ctx, logs, appendLogsSQL)
}

// AppendHeldLogs stores log lines of attempts the caller found held by
// the instances that sent them (the journal engine's leader, from the
// partition's state), without AppendLogs' check against fairway_job.
func (s *Store) AppendHeldLogs(ctx context.Context, logs []AttemptLog) error {
	return s.appendLogs(ctx, logs, appendHeldLogsSQL)
}

func (s *Store) appendLogs(ctx context.Context, logs []AttemptLog, query string) error {
	var atts []Attempt
	var levels, msgs []string
	var times []time.Time
	for _, l := range logs {
		for _, line := range l.Lines {
			atts = append(atts, l.Attempt)
			levels, msgs, times = append(levels, line.Level), append(msgs, line.Message), append(times, line.Time)
		}
	}
	if len(atts) == 0 {
		return nil
	}
	a := attemptArrays(atts)
	// The worker is cleared when an attempt ends as stuck: then the
	// instance alone names the sender.
	args := []any{a.groups, a.ids, a.attempts, times, levels, msgs}
	if query == appendLogsSQL {
		args = append(args, a.executors, a.instances)
	}
	_, err := s.pool.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("storing %d log lines: %w", len(atts), interpretError(err))
	}
	return nil
}

// Progress is a task's progress report about an attempt.
type Progress struct {
	Attempt
	Progress int
}

// setProgressSQL finds rows by primary key only (see complete.sql): with
// statistics that expect few held jobs, the planner would otherwise scan an
// executor's held jobs once per report. Only the instance holding the
// attempt sets its progress.

// UnstorableJSON returns the indexes of the documents PostgreSQL cannot
// store as jsonb, checked in one statement: after a batch was refused, it
// names the values at fault.
func (s *Store) UnstorableJSON(ctx context.Context, docs [][]byte) ([]int, error) {
	texts := make([]string, len(docs))
	sendable := make([]bool, len(docs))
	for i, d := range docs {
		// Text PostgreSQL refuses as a parameter would fail the statement:
		// such a document is unstorable without asking.
		if utf8.Valid(d) && bytes.IndexByte(d, 0) < 0 {
			texts[i], sendable[i] = string(d), true
		}
	}
	rows, err := s.pool.Query(ctx, unstorableJsonSQL, texts, sendable)
	if err != nil {
		return nil, fmt.Errorf("checking %d documents: %w", len(docs), interpretError(err))
	}
	bad, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("checking %d documents: %w", len(docs), interpretError(err))
	}
	return bad, nil
}
