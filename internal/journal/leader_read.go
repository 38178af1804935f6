package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fairwayhq/fairway"
)

// ErrNotRestored: this coordinator has not restored the partition's state
// yet (it is starting), and the read's time ran out.
var ErrNotRestored = errors.New("journal: the partition's state is not restored yet on this coordinator")

// JobView is an unfinished job as the partition's state holds it, with
// its submission (arguments and the fields the state does not keep).
type JobView struct {
	Ref fairway.JobRef
	// Job is a copy of the state's job.
	Job Job
	// Submission is the item that submitted it, Submitted its row's time.
	Submission Item
	Submitted  time.Time
}

// lockFolded waits until this coordinator restored the partition's state
// (ErrNotRestored if ctx ends first), takes the state's lock and folds
// every row committed before the call: what a read does so that a change
// acknowledged before it, by any coordinator, is seen (read your writes).
// The caller unlocks l.mu, unless it returns an error.
func (l *Leader) lockFolded(ctx context.Context) error {
	select {
	case <-l.restored:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotRestored, ctx.Err())
	}
	l.mu.Lock()
	if err := l.fold(ctx, nil); err != nil {
		l.mu.Unlock()
		return err
	}
	return nil
}

// Jobs returns the unfinished jobs of refs (those the state does not hold,
// never submitted or ended, are left out), as of now: it first folds
// every row committed before the call, so that a change acknowledged
// before it, by any coordinator, is seen (read your writes, condition 2
// of issue 31). A follower answers as well as the leader: both fold the
// same rows. The jobs' submissions come from memory (recentRows) or are
// read from PostgreSQL, without the lock. A coordinator that is starting
// answers once it has restored the state (ErrNotRestored if ctx ends
// first).
func (l *Leader) Jobs(ctx context.Context, refs []fairway.JobRef) (map[fairway.JobRef]*JobView, error) {
	if err := l.lockFolded(ctx); err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	out := make(map[fairway.JobRef]*JobView, len(refs))
	var rows []int64
	for _, ref := range refs {
		j := l.state.Jobs[ref]
		if j == nil || out[ref] != nil {
			continue
		}
		v := &JobView{Ref: ref, Job: *j}
		v.Job.Waits = slices.Clone(j.Waits)
		if j.Holder != nil {
			h := *j.Holder
			v.Job.Holder = &h
		}
		out[ref] = v
		rows = append(rows, j.Row)
	}
	if len(out) == 0 {
		return out, nil
	}
	submitted, err := l.submittedRows(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("reading the jobs' submissions: %w", err)
	}
	for _, v := range out {
		row := submitted[v.Job.Row]
		if int(v.Job.Index) >= len(row.items) {
			return nil, fmt.Errorf("journal row %d holds no item %d (job %s/%s)", v.Job.Row, v.Job.Index, v.Ref.Group, v.Ref.ID)
		}
		v.Submission, v.Submitted = row.items[v.Job.Index], row.at
		v.Submission.Args = slices.Clone(v.Submission.Args) // not the row's body
	}
	return out, nil
}

// submittedRows returns the submitted rows ids, decoded: those folded last
// from memory (recentRows), the others read from PostgreSQL in one query.
// Called with l.mu held; it lets go of it over the read and the decoding.
func (l *Leader) submittedRows(ctx context.Context, ids []int64) (map[int64]submittedRow, error) {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	kept := map[int64]recentRow{}
	var missing []int64
	for _, id := range slices.Compact(ids) {
		if row, ok := l.recent.get(id); ok {
			kept[id] = row
		} else {
			missing = append(missing, id)
		}
	}
	l.mu.Unlock()
	defer l.mu.Lock()
	submitted, err := readSubmitted(ctx, l.db, missing)
	if err != nil {
		return nil, err
	}
	for id, row := range kept {
		items, err := Decode(row.body)
		if err != nil {
			return nil, fmt.Errorf("journal row %d: %w", id, err)
		}
		submitted[id] = submittedRow{at: row.at, items: items}
	}
	return submitted, nil
}

// ReleasePending releases pending jobs by hand, as the partition's leader:
// each becomes waiting, due now, in one release row of those it changes.
// It returns, per job, whether it was released; a job that is not pending
// is not, nor is one that waits for its dependencies (they release it).
// ErrNotLeading when this coordinator does not lead.
func (l *Leader) ReleasePending(ctx context.Context, refs []fairway.JobRef) ([]bool, error) {
	return l.changeJobs(ctx, refs, Release, "releasing", func(j *Job) bool { return j.State == fairway.StatePending && len(j.Waits) == 0 }, nil)
}

// TrackerHolder returns the id of group's unfinished job that holds
// tracker ("" when none does) as of now: as Jobs, it first folds every row
// committed before the call.
func (l *Leader) TrackerHolder(ctx context.Context, group, tracker string) (string, error) {
	if err := l.lockFolded(ctx); err != nil {
		return "", err
	}
	defer l.mu.Unlock()
	return l.state.Trackers[fairway.JobRef{Group: group, ID: tracker}], nil
}

// Has says whether ref is an unfinished job of the partition as of now:
// as Jobs (a fold of every row committed before the call first), without
// reading its submission.
func (l *Leader) Has(ctx context.Context, ref fairway.JobRef) (bool, error) {
	if err := l.lockFolded(ctx); err != nil {
		return false, err
	}
	defer l.mu.Unlock()
	return l.state.Jobs[ref] != nil, nil
}
