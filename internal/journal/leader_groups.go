package journal

import (
	"context"
	"fmt"

	"github.com/fairwayhq/fairway"
)

// Pause stops (pause true) or resumes the claims of group's jobs, as the
// partition's leader: a paused or resumed row. Jobs held already run on.
// It says whether it changed anything (pausing a paused group does not).
// ErrNotLeading when this coordinator does not lead.
func (l *Leader) Pause(ctx context.Context, group string, pause bool) (bool, error) {
	if err := fairway.CheckName("group", group); err != nil {
		return false, err
	}
	if err := l.lockLeading(ctx); err != nil {
		return false, err
	}
	defer l.unlockLeading()
	if l.state.Paused[group] == pause {
		return false, nil
	}
	kind := Resumed
	if pause {
		kind = Paused
	}
	if err := l.appendOne(ctx, kind, Item{Group: group}); err != nil {
		return false, err
	}
	return true, nil
}

// SetPriority sets the priority of the unfinished jobs of refs, as the
// partition's leader: one priority row of those it changes (a held job's
// counts when it waits again). It returns, per job, whether it changed
// (false: not found, ended, or already of that priority: an ended job's
// record keeps the priority it ended with).
func (l *Leader) SetPriority(ctx context.Context, refs []fairway.JobRef, priority fairway.Priority) ([]bool, error) {
	if priority != fairway.PriorityHigh && priority != fairway.PriorityLow {
		return nil, fairway.Invalid("priority", "%q: high or low", priority)
	}
	return l.changeJobs(ctx, refs, Priority, "setting the priority of", func(j *Job) bool { return j.Priority() != string(priority) },
		func(it *Item) { it.Priority = string(priority) })
}

// changeJobs appends, as the partition's leader, one row of kind naming
// the jobs of refs that the state holds and that change says the row
// changes (each once; set fills an item's other fields), and folds it. It
// returns, per job, whether the row names it. what names the change in
// an error.
func (l *Leader) changeJobs(ctx context.Context, refs []fairway.JobRef, kind Kind, what string, change func(*Job) bool, set func(*Item)) ([]bool, error) {
	if err := l.lockLeading(ctx); err != nil {
		return nil, err
	}
	defer l.unlockLeading()
	out := make([]bool, len(refs))
	var items []Item
	seen := map[fairway.JobRef]bool{}
	for i, ref := range refs {
		j := l.state.Jobs.Get(ref)
		if j == nil || seen[ref] || !change(j) {
			continue
		}
		seen[ref] = true
		out[i] = true
		it := Item{Group: ref.Group, ID: ref.ID}
		if set != nil {
			set(&it)
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return out, nil
	}
	read, err := l.appendBatches(ctx, []batch{{kind: kind, items: items}})
	if err != nil {
		return nil, fmt.Errorf("%s %d jobs: %w", what, len(items), err)
	}
	return out, l.fold(ctx, read)
}
