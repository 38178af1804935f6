package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/wirejson"
)

// A job's record is in a batch of records (fairway_record, read through
// the view fairway_job), written once, at its end, in
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

// recordsSQL writes ended jobs' records as one batch (fairway_record,
// migration 027), if the leader's epoch is still the partition's ($1
// partition, $2 epoch: the check of appendFencedSQL, under the same lock
// and at the same now(), so that the records are written exactly when the
// rows that end the jobs are appended); $3 and $4 are the jobs' groups
// and ids (their keys, computed here), $5 the ids they depended on, $6
// the records, $7 to $11 their tasks, states, starts, due times and
// finished times (what the stats read: fairway_record_stat; a record's
// finished time is when its handler returned, as its executor said,
// within its start and now, else the leader's now). One row per batch, where a row
// per job cost PostgreSQL about 16 µs of CPU and 590 bytes of WAL a job
// (docs/performance.md, "The records, measured apart"). A record's place
// in its batch (n) is below 2^20, which its seq counts on
// (fairway_record_job): an append that ends more jobs than recordsPerBatch
// writes their records in several rows.
const recordsSQL = `INSERT INTO fairway_record (partition, finished, keys, groups, waits, s_groups, s_tasks, s_states, s_started, s_due, s_finished, jobs)
SELECT $1, now(), ARRAY(SELECT hashtextextended(g || E'\x1f' || i, 0) FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS k (g, i, o) ORDER BY k.o),
       ARRAY(SELECT DISTINCT unnest($3::text[])), $5::text[], $3::text[], $7::text[], $8::text[], $9::bigint[], $10::bigint[], $11::bigint[], $6::json
 WHERE EXISTS (SELECT 1 FROM fairway_journal_lease l WHERE l.partition = $1 AND l.epoch = $2 AND l.until > now())`

// recordsPerBatch bounds the records of one row of fairway_record: an
// append may end any number of jobs (a group's cancelled at once), and a
// record's place in its row (n) must stay below 2^20 (seq), and a read of
// one record parses its row up to it (a row of 4,096 records of 300 bytes:
// about 1.2 MB, 15 ms at worst).
const recordsPerBatch = 4096

// byOutcome splits ends by their final state, in the order of each
// state's first end: a batch of records holds one outcome, so that
// retention, which keeps each outcome for a time of its own (successes a
// day, failures a month by default), deletes whole batches rather than
// writing the failures again without the successes around them.
func byOutcome(ends []ended) [][]ended {
	if len(ends) == 0 {
		return nil
	}
	first, mixed := ends[0].change.To, false
	for _, e := range ends[1:] {
		if e.change.To != first {
			mixed = true
			break
		}
	}
	if !mixed {
		return [][]ended{ends}
	}
	var order []fairway.State
	by := map[fairway.State][]ended{}
	for _, e := range ends {
		if _, seen := by[e.change.To]; !seen {
			order = append(order, e.change.To)
		}
		by[e.change.To] = append(by[e.change.To], e)
	}
	out := make([][]ended, len(order))
	for i, st := range order {
		out[i] = by[st]
	}
	return out
}

// RecordsLockSQL is taken, until its transaction ends, by whatever writes
// a batch of records again (retention's prune, forgetRecordsSQL): two
// writers of one batch would each write it from what it read before the
// other's change, and undo that change.
const RecordsLockSQL = `SELECT pg_advisory_xact_lock(hashtext('fairway: records written again'))`

// forgetRecordsSQL takes the records of jobs ($3 groups, $4 ids) out of
// their batches, under the epoch check of recordsSQL ($1, $2): a job
// retried by hand is live again, and its next end records it anew. Sent
// after RecordsLockSQL, in its transaction.
const forgetRecordsSQL = `SELECT count(*)
  FROM (SELECT b.id AS batch, array_agg(x.o) AS gone
          FROM fairway_record b
         CROSS JOIN LATERAL json_array_elements(b.jobs) WITH ORDINALITY AS x (e, o)
         WHERE b.keys && ARRAY(SELECT hashtextextended(g || E'\x1f' || i, 0) FROM unnest($3::text[], $4::text[]) AS k (g, i))
           AND (x.e->>'group_name', x.e->>'id') IN (SELECT * FROM unnest($3::text[], $4::text[]))
           AND EXISTS (SELECT 1 FROM fairway_journal_lease l WHERE l.partition = $1 AND l.epoch = $2 AND l.until > now())
         GROUP BY b.id) c
 CROSS JOIN LATERAL fairway_records_drop(c.batch, c.gone)`

// retriedRefs are the groups and ids of the jobs that batches retry by
// hand.
func retriedRefs(batches []batch) (groups, ids []string) {
	for _, b := range batches {
		if b.kind != Retried {
			continue
		}
		for _, it := range b.items {
			groups, ids = append(groups, it.Group), append(ids, it.ID)
		}
	}
	return groups, ids
}

// record is a job's record in a batch's jobs (fairway_record_job's
// columns; times in microseconds since the Unix epoch, those that may be
// unset absent when zero).
type record struct {
	N           int             `json:"n"`
	Group       string          `json:"group_name"`
	ID          string          `json:"id"`
	Task        string          `json:"task"`
	Args        json.RawMessage `json:"args,omitempty"`
	Subject     string          `json:"subject,omitempty"`
	Submitter   string          `json:"submitter,omitempty"`
	Priority    string          `json:"priority,omitempty"`
	Tracker     string          `json:"tracker,omitempty"`
	State       fairway.State   `json:"state"`
	Retries     int32           `json:"retries,omitempty"`
	MaxRetries  int32           `json:"max_retries"`
	Attempt     int32           `json:"attempt,omitempty"`
	RunAt       int64           `json:"run_at"`
	ExpiresAt   int64           `json:"expires_at,omitempty"`
	DependsOn   []string        `json:"depends_on,omitempty"`
	Progress    int16           `json:"progress,omitempty"`
	Worker      string          `json:"worker,omitempty"`
	Instance    string          `json:"worker_instance,omitempty"`
	Submitted   int64           `json:"submitted"`
	Scheduled   int64           `json:"scheduled_at,omitempty"`
	Started     int64           `json:"started,omitempty"`
	Finished    int64           `json:"finished,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Error       string          `json:"error,omitempty"`
	TraceParent string          `json:"traceparent,omitempty"`
	TimeoutMS   int64           `json:"timeout_ms,omitempty"`
}

// recordsArgs are recordsSQL's arguments for the records of jobs (the rows
// that submitted them read in submitted).
func recordsArgs(partition int16, epoch int64, jobs []ended, submitted map[int64]submittedRow, now int64) ([]any, error) {
	n := len(jobs)
	groups, ids, tasks, states := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	started, due, finished := make([]int64, n), make([]int64, n), make([]int64, n)
	records := make([]record, n)
	var waits []string
	for i, e := range jobs {
		row := submitted[e.job.Row()]
		sub, ok := row.items[e.job.Index()]
		if !ok {
			return nil, fmt.Errorf("the record of %s/%s: journal row %d holds no item %d", e.ref.Group, e.ref.ID, e.job.Row(), e.job.Index())
		}
		groups[i], ids[i] = e.ref.Group, e.ref.ID
		r := record{N: i, Group: e.ref.Group, ID: e.ref.ID, Task: e.job.Task, Subject: sub.Subject, Submitter: sub.Submitter,
			Priority: e.job.Priority(), Tracker: sub.Tracker, State: e.change.To, Attempt: e.job.Attempt,
			MaxRetries: int32(e.job.MaxRetries), Retries: int32(e.job.Retries), RunAt: e.job.RunAt, ExpiresAt: e.job.ExpiresAt(),
			Submitted: submittedTime(row.at, e.job.Index(), sub).UnixMicro(), DependsOn: sub.Waits, Progress: int16(e.job.Progress),
			Error: dropNUL(e.change.Error), TraceParent: sub.TraceParent}
		if e.change.To == fairway.StateFailed && (e.kind == Ended || e.kind == Released) {
			r.Retries++ // the attempt that failed last counts
		}
		r.Finished = now
		if h := e.job.Holder; h != nil {
			r.Scheduled, r.Started, r.Worker, r.Instance = h.Scheduled, h.Started, h.Executor, h.Instance
			if e.item.EndedAt != 0 {
				// When its handler returned, as its executor said, kept
				// after its start (or hand-over) and before now.
				r.Finished = min(max(e.item.EndedAt, h.Started, h.Scheduled), now)
			}
		}
		if d, err := time.ParseDuration(sub.Timeout); err == nil {
			r.TimeoutMS = d.Milliseconds()
		}
		if len(sub.Args) > 0 {
			r.Args = sub.Args
		}
		if e.kind == Ended && e.change.To == fairway.StateSuccess && len(e.item.Result) > 0 {
			r.Result = e.item.Result
		}
		waits = append(waits, sub.Waits...)
		records[i] = r
		tasks[i], states[i], started[i], due[i], finished[i] = r.Task, string(r.State), r.Started, max(r.Submitted, r.RunAt), r.Finished
	}
	body, err := wirejson.Marshal(records) // segmentio's encoder: the stdlib's reflection was 2% of a drain's leader
	if err != nil {
		return nil, fmt.Errorf("encoding the records of %d jobs: %w", n, err)
	}
	if len(waits) > 0 {
		slices.Sort(waits)
		waits = slices.Compact(waits)
	}
	return []any{partition, epoch, groups, ids, waits, body, tasks, states, started, due, finished}, nil
}

// dropNUL is s without NUL characters, which PostgreSQL's text cannot
// hold (a record's JSON would take one, and its reads then fail).
func dropNUL(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "")
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
