// Run-time subscriptions (Exq's subscribe and unsubscribe): an executor
// that runs can take a new task (Handle), drop one (Unhandle), change its
// slots (SetConcurrency), and be paused and resumed, wholly or for one
// task, by an operator (fairway executors pause|resume). Jobs in flight
// finish; a job a dispatch hands out for a task the executor no longer
// takes goes back to waiting.

package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
)

// Unhandle stops taking jobs of task: the next dispatch asks for none, its
// running jobs finish, and a job of it that a dispatch in flight hands out
// goes back to waiting for another executor. The coordinators are told at
// once. Unknown tasks are ignored.
func (e *Executor) Unhandle(task string) {
	e.mu.Lock()
	if _, ok := e.handlers[task]; !ok {
		e.mu.Unlock()
		return
	}
	delete(e.handlers, task)
	e.dropped[task] = true
	running := e.life == lifeRunning
	if running {
		delete(e.chained, task)
		e.setTasks()
	}
	e.mu.Unlock()
	if running {
		e.reregister("no longer handles task " + task)
	}
}

// SetConcurrency changes how many jobs the executor runs at once. Lowered,
// running jobs finish and no new one starts until fewer than n run.
func (e *Executor) SetConcurrency(n int) error {
	if n < 1 {
		return fairway.Invalid("concurrency", "%d is less than 1", n)
	}
	e.mu.Lock()
	e.pool = n
	e.startQueued()
	running := e.life == lifeRunning
	e.mu.Unlock()
	if running {
		e.reregister(fmt.Sprintf("runs %d jobs at once", n))
		e.signal()
	}
	return nil
}

// Pause stops taking jobs: of task, or of every task when task is "".
// Running jobs finish. Resume undoes it.
func (e *Executor) Pause(task string) { e.setPaused(task, true) }

// Resume takes jobs again after Pause (of task, or of every task when task
// is "").
func (e *Executor) Resume(task string) { e.setPaused(task, false) }

// Paused says what the executor does not take jobs of now: every task
// (all), or the tasks listed.
func (e *Executor) Paused() (all bool, tasks []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for task := range e.paused {
		tasks = append(tasks, task)
	}
	slices.Sort(tasks)
	return e.pausedAll, tasks
}

func (e *Executor) setPaused(task string, paused bool) {
	e.mu.Lock()
	if task == "" {
		e.pausedAll = paused
	} else if paused {
		e.paused[task] = true
	} else {
		delete(e.paused, task)
	}
	if e.chained != nil {
		e.setTasks()
	}
	e.mu.Unlock()
	if paused {
		// Jobs held beyond the pool have not started: back to waiting.
		e.releaseQueued(func(rj *runningJob) bool { return task == "" || rj.job.Task == task }, errPaused)
	}
	what := "all tasks"
	if task != "" {
		what = "task " + task
	}
	if paused {
		e.logger.Info("paused: no new jobs of "+what+"; running ones finish", "task", task)
	} else {
		e.logger.Info("resumed: taking jobs of "+what+" again", "task", task)
		e.signal()
	}
}

// setTasks computes the tasks to ask jobs for. Called with e.mu held.
func (e *Executor) setTasks() {
	tasks := make([]string, 0, len(e.chained))
	for task := range e.chained {
		if !e.paused[task] {
			tasks = append(tasks, task)
		}
	}
	sort.Strings(tasks)
	e.tasks = tasks
}

// registeredTasks are the tasks the executor tells the coordinators it
// runs: every task it has a handler for, paused ones included (a pause is
// an operator's, for a while). Called with e.mu held.
func (e *Executor) registeredTasks() []string {
	tasks := make([]string, 0, len(e.handlers))
	for task := range e.handlers {
		tasks = append(tasks, task)
	}
	slices.Sort(tasks)
	return tasks
}

// reregister tells the coordinators the executor's new tasks and slots,
// registering its instance again (which keeps its jobs).
func (e *Executor) reregister(why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*registerTimeout)
	defer cancel()
	if err := e.register(ctx); err != nil {
		e.logger.Warn("telling the coordinators of a change; the next registration will", "change", why, "error", err)
		return
	}
	e.logger.Info("executor changed", "change", why)
}

// onPause answers a pause or resume command (events.PauseCommand): sent by
// the coordinators on an operator's request.
func (e *Executor) onPause(msg *nats.Msg) {
	var cmd events.PauseCommand
	if err := json.Unmarshal(msg.Data, &cmd); err != nil || (cmd.Task != "" && fairway.CheckName("task", cmd.Task) != nil) {
		e.logger.Warn("ignoring a pause command", "subject", msg.Subject, "error", err)
		return
	}
	e.setPaused(cmd.Task, !cmd.Resume)
}
