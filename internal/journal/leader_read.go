package journal

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
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
	// Submission is the item that submitted it, Submitted its row's time
	// plus its index in microseconds (submittedTime).
	Submission Item
	Submitted  time.Time
}

// lockFolded waits until this coordinator restored the partition's state
// (ErrNotRestored if ctx ends first), takes the state's lock and folds
// every row committed before the call: what a read does so that a change
// acknowledged before it, by any coordinator, is seen (read your writes).
// ErrUnreachable, trying nothing, while the partition's database could
// not be reached at the last try (Observe). The caller unlocks l.mu,
// unless it returns an error.
func (l *Leader) lockFolded(ctx context.Context) error {
	select {
	case <-l.restored:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotRestored, ctx.Err())
	}
	l.mu.Lock()
	if !l.Reachable() { // found so by the call it may have waited behind
		l.mu.Unlock()
		return ErrUnreachable
	}
	if err := l.fold(ctx, nil); err != nil {
		l.mu.Unlock()
		l.Observe(err)
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
	var views []*JobView
	for _, ref := range refs {
		j := l.state.Jobs.Get(ref)
		if j == nil || out[ref] != nil {
			continue
		}
		v := l.viewOf(ref, j)
		out[ref], views = v, append(views, v)
	}
	if err := l.withSubmissions(ctx, views); err != nil {
		return nil, err
	}
	return out, nil
}

// viewOf is a view of job j of ref, in copies of the state's.
func (l *Leader) viewOf(ref fairway.JobRef, j *Job) *JobView {
	return &JobView{Ref: ref, Job: j.Copy()}
}

// withSubmissions fills the views' submissions from the rows that
// submitted them. Called with l.mu held, which it lets go of while it
// reads PostgreSQL (submittedRows).
func (l *Leader) withSubmissions(ctx context.Context, views []*JobView) error {
	if len(views) == 0 {
		return nil
	}
	want := wantedItems{}
	for _, v := range views {
		want.add(v.Job.Row(), v.Job.Index())
	}
	submitted, err := l.submittedRows(ctx, want)
	if err != nil {
		return fmt.Errorf("reading the jobs' submissions: %w", err)
	}
	for _, v := range views {
		row := submitted[v.Job.Row()]
		sub, ok := row.items[v.Job.Index()]
		if !ok {
			return fmt.Errorf("journal row %d holds no item %d (job %s/%s)", v.Job.Row(), v.Job.Index(), v.Ref.Group, v.Ref.ID)
		}
		v.Submission = sub
		v.Submitted = submittedTime(row.at, v.Job.Index(), v.Submission)
		v.Submission.Args = slices.Clone(v.Submission.Args) // not the row's body
	}
	return nil
}

// submittedRows returns the items want of the rows that submitted them,
// decoded: those of the rows folded last or read last from memory
// (recentRows), the others read from PostgreSQL in one query, and kept
// there in turn: a backlog in many groups is claimed oldest first, and
// the oldest jobs of a hundred groups' claims after another share their
// rows (a caller's 10,000 jobs are one row). Called with l.mu held; it
// lets go of it over the read (the kept rows' items are decoded under it,
// through their offsets: recentRows.decodeSome).
func (l *Leader) submittedRows(ctx context.Context, want wantedItems) (map[int64]submittedRow, error) {
	submittedKept := map[int64]submittedRow{}
	missing := wantedItems{}
	for id, indexes := range want {
		sub, ok, err := l.recent.decodeSome(id, indexes)
		switch {
		case err != nil:
			return nil, fmt.Errorf("journal row %d: %w", id, err)
		case ok:
			submittedKept[id] = sub
		default:
			missing[id] = indexes
		}
	}
	l.mu.Unlock()
	read := map[int64]recentRow{}
	submitted, err := readSubmitted(ctx, l.db, missing, func(id int64, at time.Time, body []byte) { read[id] = recentRow{at: at, body: body} })
	l.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(read)) {
		l.recent.keep(id, read[id].at, read[id].body)
	}
	if err != nil {
		return nil, err
	}
	maps.Copy(submitted, submittedKept)
	return submitted, nil
}

// ReleasePending releases pending jobs by hand, as the partition's leader:
// each becomes waiting, due now, in one release row of those it changes.
// It returns, per job, whether it was released; a job that is not pending
// is not, nor is one that waits for its dependencies (they release it).
// ErrNotLeading when this coordinator does not lead.
func (l *Leader) ReleasePending(ctx context.Context, refs []fairway.JobRef) ([]bool, error) {
	return l.changeJobs(ctx, refs, Release, "releasing", func(j *Job) bool { return j.State() == fairway.StatePending && len(j.Waits()) == 0 }, nil)
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
	return l.state.Jobs.Get(ref) != nil, nil
}

// Folded returns a channel closed when the next fold has read the
// journal: a caller that waits for the leader's next rows (a resolution,
// say) looks at the state, then waits for it.
func (l *Leader) Folded() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.folded == nil {
		l.folded = make(chan struct{})
	}
	return l.folded
}

// Resolving says whether job ref is pending for a dependency that the
// state no longer holds (it ended): the leader owes it a resolved row,
// which releases or cancels it. No fold: the caller folded (a read).
func (l *Leader) Resolving(ref fairway.JobRef) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.state == nil {
		return false
	}
	j := l.state.Jobs.Get(ref)
	if j == nil || j.State() != fairway.StatePending {
		return false
	}
	for _, w := range j.Waits() {
		if l.state.Jobs.Get(fairway.JobRef{Group: ref.Group, ID: w}) == nil {
			return true
		}
	}
	return false
}

// HeldJob is what a progress message says of a job an executor holds
// (Leader.HeldJobs).
type HeldJob struct {
	Task     string
	Attempt  int32
	Progress int16
	// Started is when its attempt started, microseconds since the Unix
	// epoch (0: not yet).
	Started int64
}

// HeldJobs returns those of refs that executors hold, as the state holds
// them now (no fold: a report that just folded asks).
func (l *Leader) HeldJobs(refs []fairway.JobRef) map[fairway.JobRef]HeldJob {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make(map[fairway.JobRef]HeldJob, len(refs))
	if l.state == nil {
		return out
	}
	for _, ref := range refs {
		if j := l.state.Jobs.Get(ref); j != nil && j.Holder != nil {
			out[ref] = HeldJob{Task: j.Task, Attempt: j.Attempt, Progress: int16(j.Progress), Started: j.Holder.Started}
		}
	}
	return out
}

// Edges is the state's part of a step of a job's graph (Leader.Edges).
type Edges struct {
	// Live are those of the ids asked for that are unfinished.
	Live map[string]bool
	// DependsOn are the dependencies as submitted of those that have any.
	DependsOn map[string][]string
	// Dependents are the unfinished jobs of the group whose depends_on
	// names one of the ids, in id order.
	Dependents []string
}

// Edges returns the state's part of a step of the API's graph of a
// group's job (store.GraphNodes walks it beside the records of ended
// jobs): which of ids are unfinished, their dependencies as submitted,
// and the unfinished jobs that depend on them. With fold, as of every row
// committed before the call (the walk's first step); without, as of the
// state now, which is that or later (its next steps: one fold a graph).
func (l *Leader) Edges(ctx context.Context, group string, ids []string, fold bool) (Edges, error) {
	if fold {
		if err := l.lockFolded(ctx); err != nil {
			return Edges{}, err
		}
		defer l.mu.Unlock()
	} else {
		select {
		case <-l.restored:
		case <-ctx.Done():
			return Edges{}, fmt.Errorf("%w: %w", ErrNotRestored, ctx.Err())
		}
		l.mu.RLock()
		defer l.mu.RUnlock()
	}
	e := Edges{Live: map[string]bool{}, DependsOn: map[string][]string{}}
	for _, id := range ids {
		ref := fairway.JobRef{Group: group, ID: id}
		if l.state.Jobs.Get(ref) != nil {
			e.Live[id] = true
			if d := l.state.DependsOn[group][id]; d != nil {
				e.DependsOn[id] = slices.Clone(d)
			}
		}
		for dependent := range l.state.NamedBy[ref] {
			e.Dependents = append(e.Dependents, dependent)
		}
	}
	slices.Sort(e.Dependents)
	return e, nil
}

// Position is where a job's submission is in the journal: its row and its
// index in the row. Newer submissions have greater positions.
type Position struct {
	Row   int64
	Index int32
}

// Less orders positions, older first.
func (p Position) Less(q Position) bool {
	return p.Row < q.Row || (p.Row == q.Row && p.Index < q.Index)
}

// ListFilter selects unfinished jobs by what the state holds of them (""
// matches any).
type ListFilter struct {
	Group, Task, Priority string
	State                 fairway.State
}

// List returns up to max unfinished jobs that f selects, submitted before
// before (the zero Position: from the newest), newest first, with their
// submissions, as of now (as Jobs: a fold first). It walks every
// unfinished job under the state's lock, keeping the max newest in a heap,
// then reads their submissions without it.
func (l *Leader) List(ctx context.Context, f ListFilter, before Position, max int) ([]*JobView, error) {
	if max <= 0 {
		return nil, nil
	}
	if err := l.lockFolded(ctx); err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	newest := &minHeap[listed]{less: func(a, b listed) bool { return a.pos.Less(b.pos) }} // the oldest kept on top
	for ref, j := range l.state.Jobs.All() {
		pos := Position{j.Row(), j.Index()}
		if (before != Position{} && !pos.Less(before)) || (f.Group != "" && ref.Group != f.Group) || (f.Task != "" && j.Task != f.Task) ||
			(f.State != "" && j.State() != f.State) || (f.Priority != "" && priorityOf(j) != f.Priority) {
			continue
		}
		if newest.Len() < max {
			heap.Push(newest, listed{pos, ref})
		} else if newest.s[0].pos.Less(pos) {
			newest.s[0] = listed{pos, ref}
			heap.Fix(newest, 0)
		}
	}
	picked := make([]listed, newest.Len())
	for i := len(picked) - 1; i >= 0; i-- {
		picked[i] = heap.Pop(newest).(listed) //nolint:forcetypeassert // a listed only
	}
	out := make([]*JobView, 0, len(picked))
	for _, p := range picked {
		out = append(out, l.viewOf(p.ref, l.state.Jobs.Get(p.ref)))
	}
	if err := l.withSubmissions(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// listed is a job List keeps, by its position.
type listed struct {
	pos Position
	ref fairway.JobRef
}

// priorityOf is a job's priority as the API says it ("" is low).
func priorityOf(j *Job) string { return cmp.Or(j.Priority(), string(fairway.PriorityLow)) }
