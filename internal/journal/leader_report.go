package journal

import (
	"context"
	"fmt"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
)

// Report is an executor's report of an attempt for the leader to append:
// Kind is Started, Progress, Ended or Released; Item names the attempt
// (Group, ID, Attempt, Executor, Instance) and carries the kind's fields
// (Progress; Outcome, RunAt, Result, Error, Permanent, RanMS, which the
// leader keeps only when its shares count time; Counted).
type Report struct {
	Kind Kind
	Item Item
}

// reportOrder is the order of a batch's rows: a start before a progress
// before an end reported in the same batch, as they happened.
var reportOrder = []Kind{Started, Progress, Released, Ended}

// Report appends executors' reports as the partition's leader, in one
// transaction (a row per kind present, in reportOrder, each with its
// reports in the order given, and the records of the jobs they end), and
// folds them. It returns, for each report, whether it applied: a report
// of an attempt its job no longer runs (a stale attempt, another
// instance's, a job that ended or was released) changes nothing, and the
// executor is told so; one of a job that has ended is not even appended.
// The answer
// is worked out before the append from the leader's state, and it is
// exact: only the leader appends these kinds, one batch after the other
// (a claim in flight meanwhile changes waiting jobs only), and a
// submission never changes a held job. ErrNotLeading when this
// coordinator does not lead; ErrFenced when it learns that another took
// the lease (nothing was appended).
func (l *Leader) Report(ctx context.Context, reports []Report) ([]bool, error) {
	byKind := map[Kind][]int{}
	for i, r := range reports {
		switch r.Kind {
		case Started, Progress, Released, Ended:
			byKind[r.Kind] = append(byKind[r.Kind], i)
		default:
			return nil, fmt.Errorf("journal: a report of kind %q (reports are %s, %s, %s or %s)", r.Kind, Started, Progress, Ended, Released)
		}
	}
	l.reports.Lock() // the reports' lane: a claim may be in flight meanwhile (Leader.claims)
	defer l.reports.Unlock()
	if err := l.lockLed(ctx); err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	applied := make([]bool, len(reports))
	views := attemptViews{}
	var batches []batch
	for _, kind := range reportOrder {
		idx := byKind[kind]
		if len(idx) == 0 {
			continue
		}
		items := make([]Item, 0, len(idx))
		for _, i := range idx {
			it := reports[i].Item
			if l.cfg.Fairness != fairness.ByTime {
				it.RanMS = 0 // learned only when shares count time
			}
			applied[i] = views.apply(l.state, kind, it)
			// A report of a job that has ended (gone from the state) is
			// not appended: it changes nothing, whoever leads, since an
			// end is final. The results sent again after a failed batch
			// (a partition's database down leaves the whole batch to be
			// tried again, every 2 s) were appended each time in every
			// other partition, and folded as nothing. Any other report
			// that does not apply is appended as before: its append
			// checks the lease, and a deposed leader, whose state may be
			// behind, does not answer it.
			if applied[i] || l.state.Jobs.Get(fairway.JobRef{Group: it.Group, ID: it.ID}) != nil {
				items = append(items, it)
			}
		}
		if len(items) > 0 {
			batches = append(batches, batch{kind: kind, items: items})
		}
	}
	if len(batches) == 0 {
		return applied, nil
	}
	read, err := l.appendLaned(ctx, batches)
	if err != nil {
		return nil, err
	}
	return applied, l.fold(ctx, read)
}

// attemptView is what a batch of reports changed of a job's attempt, as
// the fold will change it: its state, and whether its holder still holds
// it.
type attemptView struct {
	state fairway.State
	gone  bool // ended or released: no report of this attempt applies after it
}

// attemptViews are the jobs a batch of reports changed.
type attemptViews map[fairway.JobRef]attemptView

// apply says whether the fold will apply a report of kind, after the
// reports before it in the batch, and counts its effect (the rules of
// State.Apply for these kinds).
func (v attemptViews) apply(s *State, kind Kind, it Item) bool {
	ref := fairway.JobRef{Group: it.Group, ID: it.ID}
	j := s.Jobs.Get(ref)
	if j == nil || !j.heldBy(it) {
		return false
	}
	view, ok := v[ref]
	if !ok {
		view = attemptView{state: j.State()}
	}
	if view.gone || !held(view.state) {
		return false
	}
	switch kind {
	case Started:
		if view.state != fairway.StateScheduled {
			return false
		}
		view.state = fairway.StateRunning
	case Ended, Released:
		view.gone = true
	}
	v[ref] = view
	return true
}
