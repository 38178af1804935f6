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
// (false: not found, ended, or already of that priority; the row engine
// also rewrites an ended job's record, which this does not).
func (l *Leader) SetPriority(ctx context.Context, refs []fairway.JobRef, priority fairway.Priority) ([]bool, error) {
	if priority != fairway.PriorityHigh && priority != fairway.PriorityLow {
		return nil, fairway.Invalid("priority", "%q: high or low", priority)
	}
	if err := l.lockLeading(ctx); err != nil {
		return nil, err
	}
	defer l.unlockLeading()
	out := make([]bool, len(refs))
	var items []Item
	seen := map[fairway.JobRef]bool{}
	for i, ref := range refs {
		j := l.state.Jobs[ref]
		if j == nil || j.Priority == string(priority) || seen[ref] {
			continue
		}
		seen[ref] = true
		out[i] = true
		items = append(items, Item{Group: ref.Group, ID: ref.ID, Priority: string(priority)})
	}
	if len(items) == 0 {
		return out, nil
	}
	read, err := l.appendBatches(ctx, []batch{{kind: Priority, items: items}})
	if err != nil {
		return nil, fmt.Errorf("setting the priority of %d jobs: %w", len(items), err)
	}
	return out, l.fold(ctx, read)
}
