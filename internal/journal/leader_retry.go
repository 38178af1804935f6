package journal

import (
	"context"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
)

// RetryOutcome is what a retry by hand did to one job.
type RetryOutcome int

// The outcomes of a retry by hand.
const (
	// RetryNotFound: no such job, live or recorded.
	RetryNotFound RetryOutcome = iota
	// RetryNotEnded: the job has not ended (or succeeded): nothing to
	// retry.
	RetryNotEnded
	// RetryDone: the job waits again (pending, when it has dependencies:
	// they are resolved anew from their records).
	RetryDone
)

// Retry retries by hand jobs that failed or were cancelled, as the
// partition's leader: one retried row of them, made from their records
// (their submission's task, priority, arguments and other fields; their
// attempts go on counting, their retries start afresh). A job's record
// leaves its batch in the retried row's transaction (a job live in the
// leader's state has no record: its next end records it anew), and its
// log lines stay with it.
// ErrNotLeading when this coordinator does not lead; ErrFenced when
// another took the lease.
func (l *Leader) Retry(ctx context.Context, refs []fairway.JobRef) ([]RetryOutcome, error) {
	if err := l.lockLeading(ctx); err != nil {
		return nil, err
	}
	defer l.unlockLeading()
	out := make([]RetryOutcome, len(refs))
	var ask []fairway.JobRef
	for i, ref := range refs {
		if l.state.Jobs.Get(ref) != nil {
			out[i] = RetryNotEnded
			continue
		}
		ask = append(ask, ref)
	}
	records, err := l.readRecords(ctx, ask)
	if err != nil {
		return nil, err
	}
	var items []Item
	seen := map[fairway.JobRef]bool{}
	for i, ref := range refs {
		if out[i] == RetryNotEnded {
			continue
		}
		it, ok := records[ref]
		switch {
		case !ok:
			out[i] = RetryNotFound
		case it.Outcome == string(fairway.StateSuccess):
			out[i] = RetryNotEnded
		default:
			out[i] = RetryDone
			if !seen[ref] {
				seen[ref] = true
				it.Outcome = ""
				it.RunAt = l.Now().UnixMicro()
				items = append(items, it)
			}
		}
	}
	if len(items) == 0 {
		return out, nil
	}
	read, err := l.appendBatches(ctx, []batch{{kind: Retried, items: items}})
	if err != nil {
		return nil, err
	}
	return out, l.fold(ctx, read)
}

// readRecords reads the records of refs as the items of a retried row
// (Outcome: the record's state), in one query.
func (l *Leader) readRecords(ctx context.Context, refs []fairway.JobRef) (map[fairway.JobRef]Item, error) {
	out := map[fairway.JobRef]Item{}
	if len(refs) == 0 {
		return out, nil
	}
	groups, ids := make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		groups[i], ids[i] = r.Group, r.ID
	}
	rows, err := l.db.Query(ctx, `SELECT j.group_name, j.id, j.state, j.task, j.priority, j.args::text, j.subject, j.submitter,
       coalesce(j.tracker, ''), coalesce(j.traceparent, ''), coalesce(j.timeout_ms, 0), j.max_retries, j.attempt,
       coalesce(j.depends_on, '{}'), coalesce((extract(epoch FROM j.expires_at) * 1e6)::bigint, 0),
       (extract(epoch FROM j.submitted) * 1e6)::bigint
  FROM unnest($1::text[], $2::text[]) AS r (group_name, id)
 CROSS JOIN LATERAL fairway_records_of(r.group_name, ARRAY[r.id]) j`, groups, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the records of %d jobs to retry: %w", len(refs), err)
	}
	defer rows.Close()
	for rows.Next() {
		var it Item
		var args string
		var timeoutMS int64
		if err := rows.Scan(&it.Group, &it.ID, &it.Outcome, &it.Task, &it.Priority, &args, &it.Subject, &it.Submitter,
			&it.Tracker, &it.TraceParent, &timeoutMS, &it.MaxRetries, &it.Attempt, &it.Waits, &it.ExpiresAt, &it.Submitted); err != nil {
			return nil, fmt.Errorf("reading the records of jobs to retry: %w", err)
		}
		it.Args = []byte(args)
		if timeoutMS > 0 {
			it.Timeout = (time.Duration(timeoutMS) * time.Millisecond).String()
		}
		if len(it.Waits) == 0 {
			it.Waits = nil
		}
		out[fairway.JobRef{Group: it.Group, ID: it.ID}] = it
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the records of jobs to retry: %w", err)
	}
	return out, nil
}
