// Rejections: the submissions refused before they are stored, recorded
// as their rejected events.

package store

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

//go:embed sql/reject.sql
var rejectSQL string

// Rejection is a submission that was refused (it failed validation, a
// quota refused it, it depends on a job never submitted): it gets a
// rejected event and no job.
type Rejection struct {
	JobID string
	Group string
	Task  string
	Err   *fairway.Error
}

// Inserted is the outcome of one submission stored.
type Inserted struct {
	// ID is the job's id (in the submission's group).
	ID string
	// Created is false when a job with this id existed already in the
	// group: the submit was a duplicate and changed nothing. Ids of other
	// groups are no concern: each group has ids of its own.
	Created bool
	// Err is set when the submission was refused; its rejected event is
	// the caller's to record (Reject).
	Err *fairway.Error
}

// Reject records the rejected events of rejections, in one statement.
func (s *Store) Reject(ctx context.Context, rejections []Rejection) error {
	if len(rejections) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, rejectSQL, rejectionArgs(rejections)); err != nil {
		return fmt.Errorf("recording %d rejected submissions: %w", len(rejections), interpretError(err))
	}
	return nil
}

// rejectionArgs are the submissions refused before the insert, as its
// named parameters rejected_*: their events' fields, capped and cleaned
// (a rejected id may be megabytes long or hold a NUL).
func rejectionArgs(rejections []Rejection) pgx.NamedArgs {
	m := len(rejections)
	ids, groups, tasks, errs, codes, fields := make([]string, m), make([]string, m), make([]string, m), make([]string, m), make([]string, m), make([]string, m)
	for i, r := range rejections {
		ids[i], groups[i], tasks[i] = fairway.TruncateRunes(r.JobID, fairway.MaxIDLength),
			fairway.TruncateRunes(r.Group, fairway.MaxNameLength), fairway.TruncateRunes(r.Task, fairway.MaxNameLength)
		errs[i], codes[i], fields[i] = fairway.TruncateBytes(r.Err.Message, fairway.MaxErrorTextSize), string(r.Err.Code), fairway.TruncateRunes(r.Err.Field, fairway.MaxNameLength)
	}
	return pgx.NamedArgs{"rejected_id": ids, "rejected_group": groups, "rejected_task": tasks, "rejected_error": errs,
		"rejected_code": codes, "rejected_field": fields}
}
