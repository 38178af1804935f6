package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fairwayhq/fairway"
)

// A job's record is its row in fairway_job, written once, at its end, in
// the transaction that appends the row that ends it (docs/journal.md,
// step 4): a job ended in the journal has its record, and a job with a
// record has ended, whatever fails in between. The leader works out
// which jobs a batch ends before appending it (State.scratch: the batch
// folded on copies of its jobs), exactly, since only the leader appends
// the rows that end jobs, one batch after the other, and a submission
// never changes a job the state holds.

// batch is a row to append: its kind and its items.
type batch struct {
	kind  Kind
	items []Item
}

// ended is a job a batch ends: the job as the state holds it before the
// batch, the change, and the item that ended it.
type ended struct {
	ref    fairway.JobRef
	job    Job
	change Change
	item   Item
	kind   Kind
}

// scratch is a state holding copies of the jobs of refs (with what they
// wait for and who waits for them, and the paused groups): a batch folded
// on it changes those jobs as it will change the state, and nothing else.
// Their dependencies as submitted (State.DependsOn) stay out: an end
// forgets them, and the records take them from the submissions.
func (s *State) scratch(refs map[fairway.JobRef]bool) *State {
	c := NewState()
	c.Paused = s.Paused // read only: batches of jobs change no group's pause
	for ref := range refs {
		j := s.Jobs.Get(ref)
		if j == nil {
			continue
		}
		cj := j.Copy() // the fold edits its holder and dependencies in place
		c.Jobs.put(ref, &cj)
		if d := s.Dependents[ref]; d != nil {
			c.Dependents[ref] = slices.Clone(d)
		}
	}
	return c
}

// endedBy returns the jobs that batches end, folded in order.
//
// Only the jobs that an item may end are copied and folded (an item acts
// on its own job): a resolution of 4,000 dependents that all go on
// waiting, or are released, copied each one's dependencies for nothing,
// 16 MB for each end of a dependency that 4,000 jobs of 256 wait for,
// and the leader's fold held its lease's renewal back past the lease.
func (s *State) endedBy(batches []batch) ([]ended, error) {
	refs := map[fairway.JobRef]bool{}
	for _, b := range batches {
		for _, it := range b.items {
			if mayEnd(b.kind, it) {
				refs[fairway.JobRef{Group: it.Group, ID: it.ID}] = true
			}
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	sc := s.scratch(refs)
	out := make([]ended, 0, len(refs))
	var kind Kind
	sc.ended = func(ref fairway.JobRef, j Job, c Change, it Item) {
		out = append(out, ended{ref: ref, job: j, change: c, item: it, kind: kind})
	}
	now := time.Now()
	for _, b := range batches {
		kind = b.kind
		// The batch itself when every item may end (a batch of ends, the
		// drain's), else a copy of those that may, made in the same pass.
		items, copied := b.items, false
		for i, it := range b.items {
			switch in := refs[fairway.JobRef{Group: it.Group, ID: it.ID}]; {
			case in && copied:
				items = append(items, it)
			case !in && !copied:
				items, copied = slices.Clone(b.items[:i]), true
			}
		}
		if _, err := sc.apply(Row{Kind: b.kind, At: now}, items); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// mayEnd says whether item it of a row of kind may end its job (State's
// finish), and so write its record: an attempt's end, a release counted
// as a failed attempt, a cancel, an expiry, a resolution that a failed
// dependency cancels.
func mayEnd(kind Kind, it Item) bool {
	switch kind {
	case Ended, Cancel, Expired:
		return true
	case Released:
		return it.Counted
	case Resolved:
		return it.Error != ""
	}
	return false
}

// submittedRow is a row that submitted jobs, as their records need it:
// its time, and the items asked for (by their index).
type submittedRow struct {
	at    time.Time
	items map[int32]Item
}

// wantedItems are the items asked for of submitted rows: per row, the
// indexes.
type wantedItems map[int64][]int32

func (w wantedItems) add(row int64, index int32) { w[row] = append(w[row], index) }

// submittedTime is when the job of item it, at index of a submitted row
// of time at, was submitted: at plus index microseconds, so that a
// batch's jobs are submitted in their order; a job retried by hand keeps
// its first submission's (Item.Submitted).
func submittedTime(at time.Time, index int32, it Item) time.Time {
	if it.Submitted != 0 {
		return time.UnixMicro(it.Submitted).UTC()
	}
	return at.Add(time.Duration(index) * time.Microsecond)
}

// readSubmitted reads the items want of the rows that submitted them, in
// one query, handing each row's body to keep (nil: none).
func readSubmitted(ctx context.Context, q Querier, want wantedItems, keep func(id int64, at time.Time, body []byte)) (map[int64]submittedRow, error) {
	out := map[int64]submittedRow{}
	if len(want) == 0 {
		return out, nil
	}
	ids := slices.Sorted(maps.Keys(want))
	rows, err := q.Query(ctx, `SELECT id, at, body FROM fairway_journal WHERE id = ANY ($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("reading the rows that submitted jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var r submittedRow
		var body []byte
		if err := rows.Scan(&id, &r.at, &body); err != nil {
			return nil, fmt.Errorf("reading the rows that submitted jobs: %w", err)
		}
		if r.items, err = decodeSome(body, want[id]); err != nil {
			return nil, fmt.Errorf("journal row %d: %w", id, err)
		}
		out[id] = r
		if keep != nil {
			keep(id, r.at, body)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the rows that submitted jobs: %w", err)
	}
	return out, nil
}

// recordsInsertSQL writes ended jobs' records, if the leader's epoch is
// still the partition's ($1 partition, $2 epoch: the check of
// appendFencedSQL, under the same lock and at the same now(), so that the
// records are written exactly when the rows that end the jobs are
// appended). A job has no record before its end but when it was retried
// by hand (Leader.Retry: it ended before): then the insert fails on the
// key, nothing of the append commits, and the append is sent again with
// recordsSQL, which replaces that record. A plain insert costs
// PostgreSQL less than one that may update (the speculative insertion
// of ON CONFLICT: about 4 µs of 18 per record in a loop of batches of
// 2,300, docs/performance.md).
const recordsInsertSQL = `INSERT INTO fairway_job AS j (group_name, id, task, args, subject, submitter, priority, tracker, state,
    retries, max_retries, attempt, run_at, expires_at, depends_on, progress, worker, worker_instance,
    submitted, scheduled_at, started, finished, result, error, traceparent, timeout_ms)
SELECT r.group_name, r.id, r.task, coalesce(r.args, '{}'), r.subject, r.submitter, coalesce(nullif(r.priority, ''), 'low'), nullif(r.tracker, ''), r.state,
       r.retries, r.max_retries, r.attempt, to_timestamp(r.run_at / 1e6), to_timestamp(nullif(r.expires_at, 0) / 1e6),
       CASE WHEN r.depends_on IS NOT NULL THEN nullif(ARRAY(SELECT jsonb_array_elements_text(r.depends_on)), '{}') END, r.progress, nullif(r.worker, ''), r.worker_instance,
       to_timestamp(r.submitted / 1e6), to_timestamp(nullif(r.scheduled, 0) / 1e6), to_timestamp(nullif(r.started, 0) / 1e6), now(),
       r.result, nullif(r.error, ''), nullif(r.traceparent, ''), nullif(r.timeout_ms, 0)
  FROM unnest($3::text[], $4::text[], $5::text[], $6::jsonb[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
              $12::int[], $13::int[], $14::int[], $15::bigint[], $16::bigint[], $17::jsonb[], $18::smallint[], $19::text[], $20::text[],
              $21::bigint[], $22::bigint[], $23::bigint[], $24::jsonb[], $25::text[], $26::text[], $27::bigint[])
       AS r (group_name, id, task, args, subject, submitter, priority, tracker, state,
             retries, max_retries, attempt, run_at, expires_at, depends_on, progress, worker, worker_instance,
             submitted, scheduled, started, result, error, traceparent, timeout_ms)
 WHERE EXISTS (SELECT 1 FROM fairway_journal_lease l WHERE l.partition = $1 AND l.epoch = $2 AND l.until > now())`

// recordsSQL is recordsInsertSQL that replaces a record written before
// (a job retried by hand that ends again).
const recordsSQL = recordsInsertSQL + `
    ON CONFLICT (group_name, id) DO UPDATE SET task = excluded.task, args = excluded.args, subject = excluded.subject,
       submitter = excluded.submitter, priority = excluded.priority, tracker = excluded.tracker, state = excluded.state,
       retries = excluded.retries, max_retries = excluded.max_retries, attempt = excluded.attempt, run_at = excluded.run_at,
       expires_at = excluded.expires_at, depends_on = excluded.depends_on, progress = excluded.progress, worker = excluded.worker,
       worker_instance = excluded.worker_instance, submitted = excluded.submitted, scheduled_at = excluded.scheduled_at,
       started = excluded.started, finished = excluded.finished, result = excluded.result, error = excluded.error,
       traceparent = excluded.traceparent, timeout_ms = excluded.timeout_ms, lease_until = NULL, cancel_requested = false`

// recordsArgs are recordsInsertSQL's (and recordsSQL's) arguments for the records of jobs (the
// rows that submitted them read in submitted).
func recordsArgs(partition int16, epoch int64, jobs []ended, submitted map[int64]submittedRow) ([]any, error) {
	n := len(jobs)
	var (
		groups, ids, tasks, subjects, submitters, priorities, trackers, states = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		retries, maxRetries, attempts                                          = make([]int32, n), make([]int32, n), make([]int32, n)
		runAt, expiresAt, submittedAt, scheduledAt, startedAt, timeouts        = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		workers, instances, errs, traceparents                                 = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		dependsOn                                                              = make([][]byte, n)
		progress                                                               = make([]int16, n)
		args, results                                                          = make([][]byte, n), make([][]byte, n)
	)
	for i, e := range jobs {
		row := submitted[e.job.Row()]
		sub, ok := row.items[e.job.Index()]
		if !ok {
			return nil, fmt.Errorf("the record of %s/%s: journal row %d holds no item %d", e.ref.Group, e.ref.ID, e.job.Row(), e.job.Index())
		}
		groups[i], ids[i], tasks[i] = e.ref.Group, e.ref.ID, e.job.Task
		subjects[i], submitters[i], priorities[i], trackers[i] = sub.Subject, sub.Submitter, e.job.Priority(), sub.Tracker
		states[i], attempts[i], maxRetries[i], retries[i] = string(e.change.To), e.job.Attempt, int32(e.job.MaxRetries), int32(e.job.Retries)
		if e.change.To == fairway.StateFailed && (e.kind == Ended || e.kind == Released) {
			retries[i]++ // the attempt that failed last counts
		}
		runAt[i], expiresAt[i], submittedAt[i] = e.job.RunAt, e.job.ExpiresAt(), submittedTime(row.at, e.job.Index(), sub).UnixMicro()
		if h := e.job.Holder; h != nil {
			scheduledAt[i], startedAt[i], workers[i], instances[i] = h.Scheduled, h.Started, h.Executor, h.Instance
		}
		if d, err := time.ParseDuration(sub.Timeout); err == nil {
			timeouts[i] = d.Milliseconds()
		}
		if len(sub.Waits) > 0 {
			w, err := json.Marshal(sub.Waits)
			if err != nil {
				return nil, err
			}
			dependsOn[i] = w
		}
		progress[i] = int16(e.job.Progress)
		errs[i], traceparents[i] = e.change.Error, sub.TraceParent
		if len(sub.Args) > 0 {
			args[i] = sub.Args
		}
		if e.kind == Ended && e.change.To == fairway.StateSuccess && len(e.item.Result) > 0 {
			results[i] = e.item.Result
		}
	}
	return []any{partition, epoch, groups, ids, tasks, args, subjects, submitters, priorities, trackers, states,
		retries, maxRetries, attempts, runAt, expiresAt, dependsOn, progress, workers, instances,
		submittedAt, scheduledAt, startedAt, results, errs, traceparents, timeouts}, nil
}

// submissions returns the rows that submitted the jobs, as far as their
// records need them: from what the claims kept (Leader.heldSubs), else read.
// Called with l.mu held.
func (l *Leader) submissions(ctx context.Context, jobs []ended) (map[int64]submittedRow, error) {
	out := map[int64]submittedRow{}
	read := wantedItems{}
	for _, e := range jobs {
		h, ok := l.heldSubs[e.ref]
		if !ok {
			read.add(e.job.Row(), e.job.Index())
			continue
		}
		row := out[e.job.Row()]
		if row.items == nil {
			row = submittedRow{at: h.at, items: map[int32]Item{}}
			out[e.job.Row()] = row
		}
		row.items[e.job.Index()] = h.item
	}
	if len(read) == 0 {
		return out, nil
	}
	rows, err := readSubmitted(ctx, l.db, read, nil)
	if err != nil {
		return nil, err
	}
	for id, r := range rows {
		if kept, ok := out[id]; ok {
			maps.Copy(kept.items, r.items)
		} else {
			out[id] = r
		}
	}
	return out, nil
}
