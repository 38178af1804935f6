package journal

import (
	"context"

	"github.com/fairwayhq/fairway"
)

// CancelOutcome is what a cancel did to one job.
type CancelOutcome int

// The outcomes of a cancel.
const (
	// CancelNotFound: the partition holds no such unfinished job (never
	// submitted, or ended: its record says how).
	CancelNotFound CancelOutcome = iota
	// CancelEnded: the job was not held; it ended cancelled, with its
	// record.
	CancelEnded
	// CancelRequested: an executor holds the job; it is marked, and ends
	// cancelled when its executor reports so (the caller tells the
	// executor).
	CancelRequested
	// CancelAlreadyRequested: it was marked before.
	CancelAlreadyRequested
)

// Cancel cancels jobs as the partition's leader: one cancel row of the
// jobs it changes (a job it does not hold, or already marked, is left out
// of the row, so that the row's effect is the one the leader answers,
// whatever submission is folded before it), and the records of the jobs
// it ends, in one transaction. why is the cancelled jobs' error (their
// records'). ErrNotLeading when this coordinator does not lead;
// ErrFenced when another took the lease (nothing was appended).
func (l *Leader) Cancel(ctx context.Context, refs []fairway.JobRef, why string) ([]CancelOutcome, error) {
	if err := l.lockLeading(ctx); err != nil {
		return nil, err
	}
	defer l.unlockLeading()
	out := make([]CancelOutcome, len(refs))
	var items []Item
	seen := map[fairway.JobRef]int{}
	for i, ref := range refs {
		if k, ok := seen[ref]; ok {
			out[i] = out[k] // named twice: one cancel
			continue
		}
		seen[ref] = i
		j := l.state.Jobs.Get(ref)
		switch {
		case j == nil:
			out[i] = CancelNotFound
		case j.CancelRequested():
			out[i] = CancelAlreadyRequested
		case held(j.State()):
			out[i] = CancelRequested
		default:
			out[i] = CancelEnded
		}
		if out[i] == CancelEnded || out[i] == CancelRequested {
			items = append(items, Item{Group: ref.Group, ID: ref.ID, Error: why})
		}
	}
	if len(items) == 0 {
		return out, nil
	}
	read, err := l.appendBatches(ctx, []batch{{kind: Cancel, items: items}})
	if err != nil {
		return nil, err
	}
	return out, l.fold(ctx, read)
}
