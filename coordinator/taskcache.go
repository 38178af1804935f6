package coordinator

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/store"
)

// taskCache holds the tasks some registered executor runs, so that a
// submission of a task nobody runs is refused with a clear error.
//
// An executor registers through one coordinator of the queue group; the
// others learn its tasks from the store. So a task missing from the cache is
// looked up in the store before it is refused, unless the cache was read
// after the submission arrived. Concurrent lookups share one read.
type taskCache struct {
	store *store.Store
	log   *slog.Logger

	refreshMu sync.Mutex // held while the store is read: one read at a time

	mu    sync.RWMutex
	tasks []string
	asOf  time.Time // when the read that returned tasks began
}

// refresh reads the known tasks from the store.
func (t *taskCache) refresh(ctx context.Context) error {
	t.refreshMu.Lock()
	defer t.refreshMu.Unlock()
	return t.refreshLocked(ctx)
}

func (t *taskCache) refreshLocked(ctx context.Context) error {
	began := time.Now()
	tasks, err := t.store.KnownTasks(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.tasks, t.asOf = tasks, began
	t.mu.Unlock()
	return nil
}

// lookup refuses task if no executor in the cache runs it, and tells
// whether the cache was read at or after received.
func (t *taskCache) lookup(task string, received time.Time) (fresh bool, err error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	fresh = !t.asOf.Before(received)
	if len(t.tasks) == 0 || slices.Contains(t.tasks, task) {
		return fresh, nil
	}
	return fresh, fairway.Invalid("task", "unknown task %q: no executor has registered it (known tasks: %s)", task, strings.Join(t.tasks, ", "))
}

// check refuses a task that no registered executor runs. received is when
// the submission arrived: a task some executor registered before then is
// accepted, through whichever coordinator it registered. Before any
// executor registered, every task is accepted. When the store cannot be
// read, the task is accepted too: a job wrongly refused is lost, one wrongly
// accepted waits for an executor that runs its task.
func (t *taskCache) check(ctx context.Context, task string, received time.Time) error {
	if fresh, err := t.lookup(task, received); err == nil || fresh {
		return err
	}
	t.refreshMu.Lock()
	defer t.refreshMu.Unlock()
	// A read that began while this one waited for the lock may do.
	if fresh, err := t.lookup(task, received); err == nil || fresh {
		return err
	}
	if err := t.refreshLocked(ctx); err != nil {
		t.log.Warn("reading the known tasks failed; accepting the task unchecked", "task", task, "error", err)
		return nil
	}
	_, err := t.lookup(task, received)
	return err
}
