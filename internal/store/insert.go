// Storing submissions: jobs with their first events, refusals with
// theirs, and jobs handed straight to an idle executor.

package store

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	//go:embed sql/insert_existing_ids.sql
	insertExistingIdsSQL string
	//go:embed sql/insert_existing_trackers.sql
	insertExistingTrackersSQL string
)

//go:embed sql/insert_jobs.sql
var insertJobsSQL string

// unstorableArgs is the message of the rejection of a submission whose
// args PostgreSQL refused although they passed validation.
const unstorableArgs = "PostgreSQL cannot store these args (a value it refuses); the rest of the batch was stored"

// Rejection is a submission that failed validation: it gets a rejected
// event and no job row.
type Rejection struct {
	JobID string
	Group string
	Task  string
	Err   *fairway.Error
}

// Inserted is the outcome of one submission passed to InsertJobs.
type Inserted struct {
	// ID is the job's id (in the submission's group).
	ID string
	// Created is false when a job with this id existed already in the
	// group: the submit was a duplicate and changed nothing. Ids of other
	// groups are no concern: each group has ids of its own.
	Created bool
	// Err is set when the submission was refused (a tracker held by another
	// job of the group, or args PostgreSQL cannot store); a rejected event
	// was written for it.
	Err *fairway.Error
	// recorded: the rejected event of Err is written already.
	recorded bool
}

// InsertJobs stores normalized submissions with their events, and writes
// rejected events for rejections. The result has one entry per submission,
// in order. The common case is one statement; submissions that were not
// created (a duplicate id, or a tracker held by another job) cost a
// follow-up query, and a refusal its rejected event.
//
// A batch that PostgreSQL refuses for a value it cannot store (a data
// exception) is sent once more with each args checked: the submissions
// whose args it cannot store are refused (invalid, field args) with their
// rejected event in that same statement, and the others are stored. The
// poison costs one extra round trip, never a statement per row. Insertions
// reports how often that happened.
//
// A submission with depends_on is refused (invalid, field depends_on[i])
// when a job it names is neither stored in its group nor earlier in subs;
// that check costs a query, paid only by batches that have dependencies.
// The jobs are stored pending: the caller resolves them (ResolveDependents),
// since their dependencies may have ended already.
func (s *Store) InsertJobs(ctx context.Context, subs []fairway.Submission, rejections []Rejection) ([]Inserted, error) {
	out, _, err := s.InsertJobsFor(ctx, subs, rejections, nil)
	return out, err
}

// Assignment hands jobs of a batch straight to an idle executor, in the
// statement that stores them: an executor whose dispatch request waits
// (parked: its claim found nothing) gets a job submitted now in one write
// and one commit, rather than a claim after the store.
type Assignment struct {
	// Executor, Instance and ClaimID are the executor's app-id and instance
	// and its dispatch request's id, as a claim records them (see
	// ClaimParams); Lease is the lease.
	Executor, Instance, ClaimID string
	Lease                       time.Duration
	// Jobs are the indexes, in subs, of the submissions to hand over: each
	// eligible now (not held, no dependencies, no run_at ahead).
	Jobs []int
	// MaxHeld, when positive, caps the jobs the instance holds with those
	// handed over (as ClaimParams.MaxHeld): beyond, none is handed over.
	MaxHeld int
}

// InsertJobsFor is InsertJobs handing the jobs a names to its executor:
// those created are stored scheduled for it, attempt 1, leased, with the
// events of a submission and of a claim, and returned (in the order of
// subs) for the dispatch reply. When that executor instance is no longer
// the one registered (and live), or concurrency limits exist (claims apply
// them), they are stored waiting, as by InsertJobs, and none is returned.
// a may be nil.
func (s *Store) InsertJobsFor(ctx context.Context, subs []fairway.Submission, rejections []Rejection, a *Assignment) ([]Inserted, []fairway.Job, error) {
	out, assigned, err := s.insertJobsFor(ctx, subs, rejections, a)
	if err != nil {
		return nil, nil, fmt.Errorf("inserting %d jobs: %w", len(subs), interpretError(err))
	}
	return out, assigned, nil
}

func (s *Store) insertJobsFor(ctx context.Context, subs []fairway.Submission, rejections []Rejection, a *Assignment) ([]Inserted, []fairway.Job, error) {
	unknown, err := unknownDependencies(ctx, s.pool, subs)
	if err != nil {
		return nil, nil, err
	}
	if len(unknown) > 0 {
		a = nil // the indexes would shift; such batches are rare
	}
	insert, at := subs, []int(nil)
	if len(unknown) > 0 {
		insert = nil
		for i, sub := range subs {
			if unknown[i] == nil {
				insert, at = append(insert, sub), append(at, i)
			}
		}
	}
	out, assigned, err := insertJobs(ctx, s.pool, insert, rejections, false, a)
	if isDataException(err) && len(insert) > 0 {
		s.checkedInserts.Add(1)
		out, _, err = insertJobs(ctx, s.pool, insert, rejections, true, nil)
		assigned = nil
	}
	if err != nil {
		return nil, nil, err
	}
	if err := markDependencies(ctx, s.pool, insert, out); err != nil {
		return nil, nil, fmt.Errorf("marking the dependencies: %w", err)
	}
	if len(unknown) > 0 {
		all := make([]Inserted, len(subs))
		for i, e := range unknown {
			all[i] = Inserted{ID: subs[i].ID, Err: e}
		}
		for k, i := range at {
			all[i] = out[k]
		}
		out = all
	}
	var refused []Rejection
	for i, r := range out {
		if r.Err != nil && !r.recorded {
			refused = append(refused, Rejection{JobID: subs[i].ID, Group: subs[i].Group, Task: subs[i].Task, Err: r.Err})
		}
	}
	if len(refused) > 0 {
		if _, _, err := insertJobs(ctx, s.pool, nil, refused, false, nil); err != nil {
			return nil, nil, fmt.Errorf("recording %d refused jobs: %w", len(refused), err)
		}
	}
	return out, assigned, nil
}

// querier is what insertJobs needs of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// CheckedInserts says how many batches InsertJobs has sent again with each
// args checked, since the store was opened.
func (s *Store) CheckedInserts() int64 { return s.checkedInserts.Load() }

// isDataException says whether PostgreSQL refused a value (SQLSTATE class
// 22: a number out of range, text it cannot store).
func isDataException(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22")
}

// insertJobs runs insert_jobs.sql, handing the jobs a names to its
// executor (see InsertJobsFor); checked, each args is checked before it is
// stored (a batch PostgreSQL refused), and a is not used.
func insertJobs(ctx context.Context, tx querier, subs []fairway.Submission, rejections []Rejection, checked bool, a *Assignment) ([]Inserted, []fairway.Job, error) {
	out := make([]Inserted, len(subs))
	// Insert in key order, so that concurrent inserts of overlapping batches
	// take their locks in the same order and cannot deadlock.
	order := make([]int, len(subs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(strings.Compare(subs[a].Group, subs[b].Group), strings.Compare(subs[a].ID, subs[b].ID))
	})
	handOver := make([]bool, len(subs))
	var executor, instance, claimID string
	var lease time.Duration
	var maxHeld int
	if a != nil && !checked {
		maxHeld = a.MaxHeld
		for _, i := range a.Jobs {
			handOver[i] = true
		}
		executor, instance, claimID, lease = a.Executor, a.Instance, a.ClaimID, a.Lease
	}
	batch := newInsertRows(len(subs), checked)
	for _, i := range order {
		batch.add(subs[i], i, handOver[i])
	}
	args := batch.named()
	for k, v := range rejectionArgs(rejections) {
		args[k] = v
	}
	args["worker"], args["instance"], args["claim_id"], args["lease"], args["max_held"] = executor, instance, claimID, interval(lease), maxHeld
	args["unstorable"] = unstorableArgs
	var created []fairway.JobRef
	handed := map[fairway.JobRef]insertedRow{} // created scheduled, for a's executor
	unstorable := map[fairway.JobRef]bool{}
	result, err := tx.Query(ctx, insertJobsSQL, args)
	if err != nil {
		return nil, nil, err
	}
	var r insertedRow
	var ok bool
	var state *fairway.State
	var runAt, submitted *time.Time
	if _, err := pgx.ForEachRow(result, []any{&r.ref.Group, &r.ref.ID, &ok, &state, &runAt, &submitted, &r.leaseUntil}, func() error {
		if !ok {
			unstorable[r.ref] = true
			return nil
		}
		created = append(created, r.ref)
		if *state == fairway.StateScheduled {
			r.runAt, r.submitted = *runAt, *submitted
			handed[r.ref] = r
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	var assigned []fairway.Job
	for _, sub := range subs {
		if r, ok := handed[fairway.JobRef{Group: sub.Group, ID: sub.ID}]; ok {
			assigned = append(assigned, assignedJob(sub, r, executor))
		}
	}
	isCreated := make(map[fairway.JobRef]bool, len(created))
	for _, ref := range created {
		isCreated[ref] = true
	}
	var missingGroups, missingIDs, trackerGroups, trackersWanted []string
	for i, sub := range subs {
		// Only the first of several submissions of one id created it.
		ref := fairway.JobRef{Group: sub.Group, ID: sub.ID}
		out[i] = Inserted{ID: sub.ID, Created: isCreated[ref]}
		delete(isCreated, ref)
		if unstorable[ref] {
			out[i].Err, out[i].recorded = fairway.Invalid("args", unstorableArgs), true
			continue
		}
		if !out[i].Created {
			// A duplicate in the batch is found by its key below.
			missingGroups, missingIDs = append(missingGroups, sub.Group), append(missingIDs, sub.ID)
			if sub.Tracker != "" {
				trackerGroups, trackersWanted = append(trackerGroups, sub.Group), append(trackersWanted, sub.Tracker)
			}
		}
	}
	if len(missingIDs) == 0 {
		return out, assigned, nil
	}
	// A row not created either has an existing id in its group (a
	// duplicate submit, fine) or a tracker held by a non-final job of its
	// group (refused).
	rows, err := tx.Query(ctx, insertExistingIdsSQL, missingGroups, missingIDs)
	if err != nil {
		return nil, nil, err
	}
	found, err := collectRefs(rows)
	if err != nil {
		return nil, nil, err
	}
	existing := make(map[fairway.JobRef]bool, len(found))
	for _, ref := range found {
		existing[ref] = true
	}
	// Trackers held, by group and tracker (a JobRef of the two).
	holders := map[fairway.JobRef]string{}
	if len(trackersWanted) > 0 {
		rows, err = tx.Query(ctx, insertExistingTrackersSQL, trackerGroups, trackersWanted)
		if err != nil {
			return nil, nil, err
		}
		for rows.Next() {
			var group, tracker, id string
			if err := rows.Scan(&group, &tracker, &id); err != nil {
				return nil, nil, err
			}
			holders[fairway.JobRef{Group: group, ID: tracker}] = id
		}
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
	}
	for i, sub := range subs {
		if out[i].Created || out[i].Err != nil || existing[fairway.JobRef{Group: sub.Group, ID: sub.ID}] {
			continue
		}
		holder := holders[fairway.JobRef{Group: sub.Group, ID: sub.Tracker}]
		if holder == "" {
			// The tracker's holder ended between the insert and the look-up:
			// trying again will store it.
			return nil, nil, &fairway.Error{Code: fairway.CodeUnavailable, JobID: sub.ID,
				Message: fmt.Sprintf("job %s raced with the end of the job holding its tracker; try again", sub.ID)}
		}
		out[i].Err = fairway.Duplicate(sub.Tracker, holder)
	}
	return out, assigned, nil
}

// insertRows are a batch's submissions as insert_jobs.sql takes them: an
// array per column, in the order rows are inserted, passed by name. A
// column is added here and in the statement, nowhere else.
type insertRows struct {
	id, task, group, subject, submitter, priority, tracker, state []string
	args                                                          [][]byte // nil when checked
	textArgs                                                      []string // nil unless checked
	maxRetries, pos                                               []int32
	runAt, expiresAt, triggerAfter                                []*time.Time
	traceparent, dependsOn                                        []string
	timeoutMS                                                     []int64
}

// newInsertRows makes room for n rows; checked passes the args as text,
// each checked before it is stored (see insert_jobs.sql).
func newInsertRows(n int, checked bool) *insertRows {
	r := &insertRows{}
	for _, col := range []*[]string{&r.id, &r.task, &r.group, &r.subject, &r.submitter, &r.priority, &r.tracker, &r.state, &r.traceparent, &r.dependsOn} {
		*col = make([]string, 0, n)
	}
	if checked {
		r.textArgs = make([]string, 0, n)
	} else {
		r.args = make([][]byte, 0, n)
	}
	return r
}

// add appends a submission: pos is its place in the batch, handOver says
// it goes straight to the assignment's executor.
func (r *insertRows) add(sub fairway.Submission, pos int, handOver bool) {
	state := fairway.StateWaiting
	switch {
	case sub.Held():
		state = fairway.StatePending
	case handOver:
		state = fairway.StateScheduled
	}
	r.id, r.task, r.group = append(r.id, sub.ID), append(r.task, sub.Task), append(r.group, sub.Group)
	if r.textArgs != nil {
		// Text PostgreSQL refuses as a parameter would fail the whole
		// statement again: '' fails the check instead.
		text := ""
		if utf8.Valid(sub.Args) && bytes.IndexByte(sub.Args, 0) < 0 {
			text = string(sub.Args)
		}
		r.textArgs = append(r.textArgs, text)
	} else {
		r.args = append(r.args, sub.Args)
	}
	r.subject, r.submitter = append(r.subject, sub.Subject), append(r.submitter, sub.Submitter)
	r.priority, r.tracker, r.state = append(r.priority, string(sub.Priority)), append(r.tracker, sub.Tracker), append(r.state, string(state))
	maxRetries := int32(0)
	if sub.MaxRetries != nil {
		maxRetries = int32(*sub.MaxRetries) //nolint:gosec // G115: Normalize bounds it to 0..MaxRetriesLimit (100)
	}
	r.maxRetries, r.pos = append(r.maxRetries, maxRetries), append(r.pos, int32(pos)) //nolint:gosec // G115: a place in one batch of submissions, far below 2^31
	r.runAt, r.expiresAt, r.triggerAfter = append(r.runAt, sub.RunAt), append(r.expiresAt, sub.ExpiresAt), append(r.triggerAfter, sub.TriggerAfter)
	var timeout int64
	if sub.Timeout != "" {
		d, _ := time.ParseDuration(sub.Timeout) // Normalize checked it
		timeout = d.Milliseconds()
	}
	r.traceparent, r.timeoutMS = append(r.traceparent, sub.TraceParent), append(r.timeoutMS, timeout)
	r.dependsOn = append(r.dependsOn, strings.Join(sub.DependsOn, " "))
}

// named is the rows as the statement's named parameters.
func (r *insertRows) named() pgx.NamedArgs {
	args := pgx.NamedArgs{
		"id": r.id, "task": r.task, "group_name": r.group, "subject": r.subject, "submitter": r.submitter,
		"priority": r.priority, "tracker": r.tracker, "state": r.state, "max_retries": r.maxRetries, "run_at": r.runAt,
		"pos": r.pos, "expires_at": r.expiresAt, "trigger_after": r.triggerAfter, "traceparent": r.traceparent,
		"timeout_ms": r.timeoutMS, "depends_on": r.dependsOn,
		"args": nil, "text_args": nil,
	}
	if r.textArgs != nil {
		args["text_args"] = r.textArgs
	} else {
		args["args"] = r.args
	}
	return args
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

// insertedRow is what insert_jobs.sql returns of a row it created.
type insertedRow struct {
	ref        fairway.JobRef
	runAt      time.Time
	submitted  time.Time
	leaseUntil *time.Time
}

// assignedJob is the job a submission became when it was stored
// scheduled for executor: what a claim would have returned.
func assignedJob(sub fairway.Submission, r insertedRow, executor string) fairway.Job {
	j := fairway.Job{ID: sub.ID, Task: sub.Task, Group: sub.Group, Args: sub.Args, Subject: sub.Subject, Submitter: sub.Submitter,
		Priority: sub.Priority, Tracker: sub.Tracker, State: fairway.StateScheduled, Attempt: 1, RunAt: r.runAt, ExpiresAt: sub.ExpiresAt,
		Executor: executor, LeaseUntil: r.leaseUntil, Submitted: r.submitted, Timeout: sub.Timeout, TraceParent: sub.TraceParent}
	if sub.MaxRetries != nil {
		j.MaxRetries = *sub.MaxRetries
	}
	if len(j.Args) == 0 {
		j.Args = []byte("{}")
	}
	return j
}

// collectRefs reads rows of (group_name, id).
func collectRefs(rows pgx.Rows) ([]fairway.JobRef, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (fairway.JobRef, error) {
		var r fairway.JobRef
		err := row.Scan(&r.Group, &r.ID)
		return r, err
	})
}

// countQueuedSQL counts a group's queued jobs, each state through its
// partial index (fairway_job_eligible, fairway_job_pending) and capped at
// $2, so that a group at its quota costs that many index entries, not all
// its jobs.
var (
	//go:embed sql/count_queued.sql
	countQueuedSQL string
)

// CountQueuedJobs returns the number of queued jobs (pending, waiting or
// stuck: non-final and not held by an executor) of each of groups,
// counting at most about limit per group. Groups without any are absent.
// The jobs executors hold (scheduled, running) are not counted: they are
// at most the executors' slots, and counting them by group would need an
// index that every claim and completion pays for.
func (s *Store) CountQueuedJobs(ctx context.Context, groups []string, limit int) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, countQueuedSQL, groups, limit)
	if err != nil {
		return nil, fmt.Errorf("counting queued jobs: %w", interpretError(err))
	}
	counts := make(map[string]int, len(groups))
	var group string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&group, &n}, func() error {
		if n > 0 {
			counts[group] = n
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("counting queued jobs: %w", interpretError(err))
	}
	return counts, nil
}
