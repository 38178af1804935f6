package journal

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
)

// Instance names an executor's instance.
type Instance struct{ Executor, Instance string }

// Release gives back the jobs that instances hold, as the partition's
// leader, by one released row (with the records of the jobs it ends): an
// executor that stops releases its jobs uncounted (counted false: they
// wait again, no attempt failed), one lost (its registration ran out)
// counted (each attempt failed, retried now unless out of retries). why
// is what the jobs' events and records say. It returns how many jobs it
// gave back. The held jobs are found by a pass over the state: a release
// is rare (an executor stops or is lost), and one call takes any number
// of instances. ErrNotLeading when this coordinator does not lead;
// ErrFenced when another took the lease.
func (l *Leader) Release(ctx context.Context, instances map[Instance]bool, counted bool, why string) (int, error) {
	if err := l.lockLeading(ctx); err != nil {
		return 0, err
	}
	defer l.mu.Unlock()
	now := time.Now().UnixMicro()
	var items []Item
	for ref, j := range l.state.Jobs {
		if j.Holder == nil || !instances[Instance{Executor: j.Holder.Executor, Instance: j.Holder.Instance}] {
			continue
		}
		it := Item{Group: ref.Group, ID: ref.ID, Attempt: j.Attempt, Executor: j.Holder.Executor, Instance: j.Holder.Instance, Counted: counted, Error: why}
		if counted {
			it.RunAt = now
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return 0, nil
	}
	// In a stable order: the row is the same whatever the map's.
	slices.SortFunc(items, func(a, b Item) int {
		return compareRefs(fairway.JobRef{Group: a.Group, ID: a.ID}, fairway.JobRef{Group: b.Group, ID: b.ID})
	})
	if err := l.appendBatches(ctx, []batch{{kind: Released, items: items}}); err != nil {
		return 0, err
	}
	return len(items), l.fold(ctx)
}

func compareRefs(a, b fairway.JobRef) int {
	return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.ID, b.ID))
}
