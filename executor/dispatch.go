// The dispatch conversation: ask the coordinators for as many jobs as there
// are free slots, and take what they hand out.

package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/wirejson"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
)

// signal wakes the dispatch loop.
func (e *Executor) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// dispatchLoop asks for jobs while there are free slots and work to get.
func (e *Executor) dispatchLoop() {
	defer close(e.dispatchDone)
	ticker := time.NewTicker(e.cfg.WakeupPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-e.stopCh:
			return
		default:
		}
		idle := true
		if a := e.free(); a.free > 0 {
			asked := time.Now()
			got, err := e.dispatch(a)
			switch {
			case err == nil:
				// A long poll that ran its course found nothing: ask again at
				// once. An empty answer that came quickly means the
				// coordinator does not hold requests: wait for a wakeup.
				idle = got == 0 && time.Since(asked) < longPoll/2
			case errors.Is(err, fairway.ErrNotRegistered):
				if !e.registerAgain() {
					return
				}
				continue
			case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
				// No answer within a long poll and a claim: the coordinator
				// that held the request is gone (killed, cut off), or
				// swamped. Asked again at once, under the same id (a claim
				// made for it is handed out then, not twice): another
				// coordinator answers, or the one that leads now.
				e.logger.Info("a dispatch request went unanswered; asking again", "subject", e.subjects.Exec(e.cfg.AppID, events.ExecDispatch), "waited", dispatchTimeout)
				continue
			case errors.Is(err, nats.ErrNoResponders):
				if time.Since(e.noCoordinatorAt) >= noCoordinatorLog {
					e.logger.Warn("no coordinator answered a dispatch request; waiting for a wakeup", "subject", e.subjects.Exec(e.cfg.AppID, events.ExecDispatch))
					e.noCoordinatorAt = time.Now()
				}
			default:
				if !errors.Is(err, fairway.ErrUnavailable) {
					e.logger.Warn("asking for jobs", "subject", e.subjects.Exec(e.cfg.AppID, events.ExecDispatch), "error", err)
				} else if time.Since(e.noCoordinatorAt) >= noCoordinatorLog {
					// The leader cannot answer now (its database down, or
					// the lead changing hands): asked again each second,
					// under the same id, which hands out what an earlier
					// try claimed. Said once a minute.
					e.logger.Warn("the coordinators cannot hand out jobs now; asking again every second", "subject", e.subjects.Exec(e.cfg.AppID, events.ExecDispatch), "error", err)
					e.noCoordinatorAt = time.Now()
				}
				// A wakeup ends the pause after unavailable: work was
				// stored, so the partition answers again. (Not after other
				// errors: one that lasts would ask at the rate of the
				// notifications.)
				var wake <-chan struct{}
				if errors.Is(err, fairway.ErrUnavailable) {
					wake = e.wake
				}
				t := time.NewTimer(e.backoff)
				select {
				case <-e.stopCh:
					t.Stop()
					return
				case <-wake:
					t.Stop()
				case <-t.C:
				}
				continue
			}
		}
		if !idle {
			continue
		}
		select {
		case <-e.stopCh:
			return
		case <-e.wake:
		case <-ticker.C:
		}
	}
}

// registerAgain registers this instance again after a coordinator said it
// does not know it: the database was restored, or the executor was taken
// for dead (marked gone, or another instance took its app-id over). A refusal (that other
// instance runs) is logged, and tried again after a wakeup period. It
// returns false when the executor stops meanwhile.
func (e *Executor) registerAgain() bool {
	// Told again soon after registering again: the coordinators disagree
	// (say, one on a restored database). Do not hammer them.
	if since := time.Since(e.registeredAgainAt); since < e.cfg.WakeupPeriod {
		t := time.NewTimer(e.cfg.WakeupPeriod - since)
		select {
		case <-e.stopCh:
			t.Stop()
			return false
		case <-t.C:
		}
	}
	e.registeredAgainAt = time.Now()
	e.logger.Warn("the coordinators do not know this executor instance (database restored, its app-id taken over, or marked gone after a silence); registering again",
		"instance", e.instance)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := e.register(ctx)
	if err == nil {
		e.logger.Info("executor registered again", "instance", e.instance)
		return true
	}
	if ctx.Err() == nil {
		e.logger.Error("registering again failed; no jobs until it succeeds", "error", err, "retry_in", e.cfg.WakeupPeriod)
	}
	t := time.NewTimer(e.cfg.WakeupPeriod)
	defer t.Stop()
	select {
	case <-e.stopCh:
		return false
	case <-t.C:
		return true
	}
}

// ask is what a dispatch request asks for: how many jobs (Slots), how many
// of them would start at once (Idle: the free slots; the rest would be
// held), how long it may wait at the leader, which tasks, and the free
// slots of the tasks with a max-concurrent below that.
type ask struct {
	free, idle int
	wait       time.Duration
	tasks      []string
	taskSlots  map[string]int
}

// free says what to ask for now: nothing (free 0) while the executor stops
// or is paused, and tasks at their cap are left out. A request that would
// only hold jobs (idle 0) waits as long as a slot may free soon, one that
// leaves a task at its cap out does not wait, others a long poll.
func (e *Executor) free() ask {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.life.stopping() || e.pausedAll || len(e.tasks) == 0 {
		return ask{}
	}
	target, soon := e.prefetch(time.Now())
	a := ask{free: e.pool + target - len(e.jobs), tasks: e.tasks, wait: longPoll}
	a.idle = min(max(e.pool-e.runningN-len(e.queued), 0), a.free)
	if a.idle == 0 {
		a.wait = min(a.wait, soon)
	}
	if len(e.maxConcurrent) == 0 || a.free <= 0 {
		return a
	}
	running := e.runningByTask()
	a.tasks = make([]string, 0, len(e.tasks))
	for _, t := range e.tasks {
		limit, capped := e.maxConcurrent[t]
		switch {
		case !capped:
			a.tasks = append(a.tasks, t)
		case limit-running[t] <= 0:
			// At its cap: not asked for, and the request does not wait
			// at the leader. A long poll for the other tasks would hold
			// the loop until it ends (a second), while the capped task's
			// job that ends meanwhile only wakes the loop after it: the
			// next of its jobs would start that much later. Without the
			// poll, the loop waits for its wakeups (a job's end, a
			// notification of work, the wakeup period) and asks at once.
			a.wait = 0
		default:
			a.tasks = append(a.tasks, t)
			if left := limit - running[t]; left < a.free {
				if a.taskSlots == nil {
					a.taskSlots = map[string]int{}
				}
				a.taskSlots[t] = left
			}
		}
	}
	if len(a.tasks) == 0 {
		return ask{}
	}
	return a
}

// runningByTask counts the jobs held, by task. Called with e.mu held.
func (e *Executor) runningByTask() map[string]int {
	n := map[string]int{}
	for _, rj := range e.jobs {
		n[rj.job.Task]++
	}
	return n
}

// dispatch asks for the jobs a says and starts them; it returns how many
// it got.
func (e *Executor) dispatch(a ask) (int, error) {
	if e.dispatchID == "" {
		e.dispatchID = uuid.NewString()
	}
	data, err := json.Marshal(events.DispatchRequest{Executor: e.cfg.AppID, Instance: e.instance, Slots: a.free, Idle: &a.idle, Tasks: a.tasks, TaskSlots: a.taskSlots,
		WaitMS: int(a.wait / time.Millisecond), RequestID: e.dispatchID})
	if err != nil {
		return 0, err
	}
	// Not cancelled by Shutdown: a reply carries jobs already claimed for
	// this executor, which must be reported on.
	ctx, cancel := context.WithTimeout(context.Background(), dispatchTimeout)
	defer cancel()
	asked := time.Now()
	msg, err := e.nc.RequestWithContext(ctx, e.subjects.Exec(e.cfg.AppID, events.ExecDispatch), data)
	rtt := time.Since(asked)
	// Until a reply hands out jobs (or says there are none), a coordinator
	// may have claimed jobs whose answer never came, or came unreadable:
	// the next request goes out under the same id, and gets them. Reusing
	// the id of a claim that failed costs nothing.
	if err != nil {
		return 0, err
	}
	var reply events.DispatchReply
	if err := wirejson.Unmarshal(msg.Data, &reply); err != nil {
		return 0, fmt.Errorf("decoding the dispatch reply: %w", err)
	}
	if reply.Error != nil {
		return 0, reply.Error
	}
	e.dispatchID = ""
	if !e.noCoordinatorAt.IsZero() {
		e.logger.Info("a coordinator answers again")
		e.noCoordinatorAt = time.Time{}
	}
	if len(reply.Jobs) > 0 && e.lastFull {
		// Work was waiting when it left: answered at once, a round trip.
		e.observeRTT(rtt)
	}
	e.lastFull = len(reply.Jobs) == a.free
	e.accept(reply.Jobs)
	return len(reply.Jobs), nil
}

// accept takes the jobs of a dispatch reply and starts a goroutine for
// each: to run it, or to report it at once (cancelled before it arrived,
// or released because the executor is stopping or full).
func (e *Executor) accept(jobs []fairway.Job) {
	e.mu.Lock()
	defer e.mu.Unlock()
	running := e.runningByTask()
	for _, fj := range jobs {
		if _, dup := e.jobs[fj.Ref()]; dup {
			e.logger.Warn("dispatch handed out a job this executor already holds; ignoring it", "job_id", fj.ID, "attempt", fj.Attempt)
			continue
		}
		if e.ran.has(fj.Ref(), fj.Attempt, time.Now()) {
			e.logger.Warn("dispatch handed out a job attempt this executor already ran; ignoring it (its report is on its way)", "job_id", fj.ID, "attempt", fj.Attempt)
			continue
		}
		mode, reason := modeRun, ""
		switch {
		case e.life.stopping():
			mode, reason = modeRelease, releasedUnrun
		case len(e.jobs) >= e.pool+e.prefetchMax:
			// Also after SetConcurrency lowered the pool meanwhile.
			e.logger.Warn("dispatch handed out more jobs than there are slots; releasing the extra job", "job_id", fj.ID)
			mode, reason = modeRelease, "released before it started: the executor had no slot for it"
		case e.maxConcurrent[fj.Task] > 0 && running[fj.Task] >= e.maxConcurrent[fj.Task]:
			// Its cap was lowered meanwhile.
			e.logger.Info("releasing a job of a task at its max-concurrent", "job_id", fj.ID, "task", fj.Task)
			mode, reason = modeRelease, "released before it started: its task is at its max-concurrent on this executor"
		case e.dropped[fj.Task] || e.paused[fj.Task]:
			// Asked for before the task was dropped or paused: back to
			// waiting, for an executor that runs it.
			e.logger.Info("releasing a job of a task this executor no longer takes", "job_id", fj.ID, "task", fj.Task)
			mode, reason = modeRelease, "released before it started: this executor no longer takes its task"
		case e.cancels.take(fj.Ref(), fj.Attempt, time.Now()):
			mode = modeCancelled
		}
		rj := e.newRunningJob(fj)
		rj.releaseReason = reason
		rj.handler = e.chained[fj.Task]
		if mode == modeRun {
			e.takeSlot(rj)
		}
		e.jobs[fj.Ref()] = rj
		running[fj.Task]++
		e.jobsWG.Add(1)
		go e.run(rj, mode)
	}
}
