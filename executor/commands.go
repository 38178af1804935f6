// Commands from the coordinators to this executor: ping and cancel.

package executor

import (
	"encoding/json"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
)

// onPing answers with the instance id. A ping that names an instance is
// answered only by that instance: while a replaced instance of the same
// app-id still runs, its answer must not make a coordinator think the
// other one is alive, or dead.
func (e *Executor) onPing(msg *nats.Msg) {
	if msg.Reply == "" || (len(msg.Data) > 0 && string(msg.Data) != e.instance) {
		return
	}
	_ = msg.Respond([]byte(e.instance))
}

// onCancel cancels the attempt a command names. The command must name the
// group, the job and the attempt: a command for another attempt than the
// one held changes nothing (there is no "whatever attempt is held"), and
// one for a job not held yet is remembered for that exact attempt, which
// a dispatch reply may be bringing.
// DrainRequested is closed when an operator asks this executor to drain
// (fairway's drain verb, the dashboard's Drain button): its owner should
// then call Shutdown, as on SIGTERM. fairway executor and fairway dev do.
func (e *Executor) DrainRequested() <-chan struct{} { return e.drainCh }

// onDrain answers a drain command. With isolated tenants (one NATS account
// each) only the coordinators' account reaches this subject, and they send
// it on an operator's drain request.
func (e *Executor) onDrain(*nats.Msg) {
	e.drainOnce.Do(func() {
		e.logger.Info("an operator asked this executor to drain: no new jobs; running ones finish, then it stops", "running", e.Running())
		close(e.drainCh)
	})
}

func (e *Executor) onCancel(msg *nats.Msg) {
	var cmd events.CancelCommand
	err := json.Unmarshal(msg.Data, &cmd)
	if err == nil {
		err = checkCancel(cmd)
	}
	if err != nil {
		e.logger.Warn("ignoring a cancel command", "subject", msg.Subject, "error", err)
		if msg.Reply != "" {
			reply, _ := json.Marshal(events.Reply{Error: fairway.AsError(err)})
			_ = msg.Respond(reply)
		}
		return
	}
	ref := fairway.JobRef{Group: cmd.Group, ID: cmd.JobID}
	e.mu.Lock()
	rj, held := e.jobs[ref]
	cancel := held && cmd.Attempt == rj.job.Attempt
	switch {
	case cancel:
		rj.cancel(errCancelRequested)
	case !held:
		e.cancels.add(ref, cmd.Attempt, time.Now())
	}
	e.mu.Unlock()
	switch {
	case cancel:
		rj.logger.Info("cancelling job")
	case held:
		rj.logger.Warn("ignoring a cancel command for another attempt than the one held", "command_attempt", cmd.Attempt)
	default:
		e.logger.Debug("cancel for a job not held yet: remembered", "group", cmd.Group, "job_id", cmd.JobID, "attempt", cmd.Attempt)
	}
	if msg.Reply != "" {
		_ = msg.Respond([]byte("{}"))
	}
}

// cancelMemo remembers job attempts, for ttl, at most max of them: the
// cancel commands for jobs not held yet (Executor.cancels), and the
// attempts this executor ran (Executor.ran). Every entry lives equally
// long, so the queue is in expiry order.
type cancelMemo struct {
	ttl   time.Duration
	max   int
	byID  map[fairway.JobRef]cancelEntry
	queue []cancelEntry
}

type cancelEntry struct {
	id      fairway.JobRef
	attempt int
	at      time.Time
}

func (m *cancelMemo) add(id fairway.JobRef, attempt int, now time.Time) {
	if m.byID == nil {
		m.byID = make(map[fairway.JobRef]cancelEntry)
	}
	for len(m.queue) > 0 && (len(m.queue) >= m.max || now.Sub(m.queue[0].at) > m.ttl) {
		m.pop()
	}
	entry := cancelEntry{id: id, attempt: attempt, at: now}
	m.byID[id] = entry
	m.queue = append(m.queue, entry)
}

func (m *cancelMemo) pop() {
	old := m.queue[0]
	m.queue[0] = cancelEntry{}
	m.queue = m.queue[1:]
	if cur, ok := m.byID[old.id]; ok && cur == old {
		delete(m.byID, old.id)
	}
}

// take reports whether a cancel for exactly this job attempt is
// remembered, and forgets it.
func (m *cancelMemo) take(id fairway.JobRef, attempt int, now time.Time) bool {
	entry, ok := m.byID[id]
	if !ok || now.Sub(entry.at) > m.ttl || entry.attempt != attempt {
		return false
	}
	delete(m.byID, id)
	return true
}

// has reports whether exactly this job attempt is remembered.
func (m *cancelMemo) has(id fairway.JobRef, attempt int, now time.Time) bool {
	entry, ok := m.byID[id]
	return ok && now.Sub(entry.at) <= m.ttl && entry.attempt == attempt
}

// checkCancel refuses a cancel command that does not name one attempt of
// one job: attempts count from 1, and 0 names none.
func checkCancel(cmd events.CancelCommand) error {
	switch {
	case cmd.Group == "":
		return fairway.Invalid("group", "a cancel command needs the job's group")
	case cmd.JobID == "":
		return fairway.Invalid("job_id", "a cancel command needs a job_id")
	case cmd.Attempt < 1:
		return fairway.Invalid("attempt", "a cancel command needs the attempt to cancel (from 1), not %d", cmd.Attempt)
	}
	return nil
}
