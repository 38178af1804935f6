package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/store"
)

// Listing on the journal engine (the list verb). The unfinished jobs come
// first, newest submitted first, from the partition's state as of the
// request (journal.Leader.List: a fold, then a walk of the unfinished jobs
// under the state's lock); then the jobs that ended, newest ended first,
// from their records (store.ListRecords). A cursor says which part a page
// ended in: "u<row>.<index>" (the last unfinished job's submission) or
// "e<seq>" (the last record's seq; "e" alone: the records from the
// newest). A job that ends while someone pages moves from the first part
// to the second, and may be listed twice or not at all, as a job
// submitted while someone pages is not listed.

// journalListChunk is how many unfinished jobs a listing asks the leader
// for at once when filters the state cannot apply (since, until, text)
// may leave some out.
const journalListChunk = 200

// journalList streams the jobs p selects to yield, the unfinished ones
// first, then the records (see above), as store.ListRecords streams
// records: at most p.Limit, and the cursor after the last job yield took
// ("" when nothing is left). A group's are its partition's; every group's
// over several partitions are listed partition by partition, each one's
// unfinished jobs and then the records of its database (once a
// database), the cursor saying which partition: "p<k>.<cursor in it>".
func (c *Coordinator) journalList(ctx context.Context, p store.ListParams, yield func(fairway.Job) bool) (string, error) {
	if p.Group != "" || len(c.parts) == 1 {
		return c.listIn(ctx, c.parts.of(p.Group), true, p, yield)
	}
	bad := fairway.Invalid("cursor", "%q is not a cursor of this listing: pass the next_cursor of a previous answer", p.Cursor)
	stage, inner := 0, ""
	if p.Cursor != "" {
		k, rest, ok := strings.Cut(strings.TrimPrefix(p.Cursor, "p"), ".")
		n, err := strconv.Atoi(k)
		if !ok || !strings.HasPrefix(p.Cursor, "p") || err != nil || n < 0 || n >= len(c.parts) {
			return "", bad
		}
		stage, inner = n, rest
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.ListLimitDefault
	}
	taken := 0
	counted := func(j fairway.Job) bool {
		if !yield(j) {
			return false
		}
		taken++
		return true
	}
	for k := stage; k < len(c.parts); k++ {
		e := c.parts[k]
		records := !slices.ContainsFunc(c.parts[:k], func(o *journalEngine) bool { return o.store == e.store })
		q := p
		q.Cursor, q.Limit = inner, limit-taken
		next, err := c.listIn(ctx, e, records, q, counted)
		switch {
		case err != nil:
			return "", err
		case next != "":
			return fmt.Sprintf("p%d.%s", k, next), nil
		case taken == limit && k+1 < len(c.parts):
			return fmt.Sprintf("p%d.", k+1), nil
		case taken == limit:
			return "", nil
		}
		inner = ""
	}
	return "", nil
}

// listIn is journalList in e's partition: its unfinished jobs, then, with
// records, the records of its database.
func (c *Coordinator) listIn(ctx context.Context, e *journalEngine, withRecords bool, p store.ListParams, yield func(fairway.Job) bool) (string, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = store.ListLimitDefault
	}
	records, before, err := parseJournalCursor(p.Cursor)
	if err != nil {
		return "", err
	}
	taken := 0
	if !records && (p.State == "" || !p.State.Final()) {
		var last journal.Position
		filter := journal.ListFilter{Group: p.Group, Task: p.Task, State: p.State, Priority: string(p.Priority)}
		narrowed := !p.Since.IsZero() || !p.Until.IsZero() || p.Text != ""
		for {
			want := limit + 1 - taken
			if narrowed {
				want = max(want, journalListChunk)
			}
			views, err := e.leader.List(ctx, filter, before, want)
			if err != nil {
				return "", journalError(err)
			}
			jobs := make([]fairway.Job, 0, len(views))
			var positions []journal.Position
			for _, v := range views {
				before = journal.Position{Row: v.Job.Row(), Index: v.Job.Index()}
				if !journalListKeeps(p, v) {
					continue
				}
				job := jobOfView(v)
				if !p.Full {
					job.Args = nil // a light listing: no arguments
				}
				jobs = append(jobs, job)
				positions = append(positions, before)
			}
			if err := c.store.MarkNoExecutor(ctx, jobs); err != nil {
				return "", err
			}
			for i, job := range jobs {
				if taken == limit || !yield(job) {
					if taken == 0 {
						return p.Cursor, nil
					}
					return fmt.Sprintf("u%d.%d", last.Row, last.Index), nil
				}
				taken, last = taken+1, positions[i]
			}
			if len(views) < want {
				break // every unfinished job was seen
			}
		}
		before = journal.Position{}
		if p.State != "" || !withRecords { // an unfinished state: no record has it
			return "", nil
		}
		if taken == limit {
			// The records from the newest, if there are any: a page that
			// ends with the last job says so (no cursor).
			more := false
			probe := p
			probe.Limit, probe.Cursor, probe.Full = 1, "", false
			if _, err := e.store.ListRecords(ctx, probe, func(fairway.Job) bool { more = true; return false }); err != nil {
				return "", err
			}
			if more {
				return "e", nil
			}
			return "", nil
		}
	}
	rp := p
	rp.Limit, rp.Cursor = limit-taken, ""
	if records && before.Row != 0 {
		rp.Cursor = strconv.FormatInt(before.Row, 10)
	}
	next, err := e.store.ListRecords(ctx, rp, yield)
	if next != "" {
		next = "e" + next
	}
	return next, err
}

// journalListKeeps applies the filters the partition's state cannot: the
// submission's time (since, until) and the text in the arguments (an
// unfinished job has no error yet), ignoring case.
func journalListKeeps(p store.ListParams, v *journal.JobView) bool {
	switch {
	case !p.Since.IsZero() && v.Submitted.Before(p.Since):
		return false
	case !p.Until.IsZero() && !v.Submitted.Before(p.Until):
		return false
	case p.Text != "" && !strings.Contains(strings.ToLower(string(v.Submission.Args)), strings.ToLower(p.Text)):
		return false
	}
	return true
}

// parseJournalCursor reads a journal listing's cursor: which part it is in
// (records or not) and where it ended (a record's seq in Row when
// records).
func parseJournalCursor(cursor string) (records bool, at journal.Position, err error) {
	bad := fairway.Invalid("cursor", "%q is not a cursor of this listing: pass the next_cursor of a previous answer", cursor)
	switch {
	case cursor == "":
		return false, at, nil
	case cursor == "e":
		return true, at, nil
	case strings.HasPrefix(cursor, "e"):
		seq, err := strconv.ParseInt(cursor[1:], 10, 64)
		if err != nil || seq <= 0 {
			return false, at, bad
		}
		return true, journal.Position{Row: seq}, nil
	case strings.HasPrefix(cursor, "u"):
		row, index, ok := strings.Cut(cursor[1:], ".")
		r, err1 := strconv.ParseInt(row, 10, 64)
		i, err2 := strconv.ParseInt(index, 10, 32)
		if !ok || err1 != nil || err2 != nil || r <= 0 || i < 0 {
			return false, at, bad
		}
		return false, journal.Position{Row: r, Index: int32(i)}, nil
	}
	return false, at, bad
}
