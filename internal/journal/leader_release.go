package journal

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
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
	defer l.unlockLeading()
	return l.release(ctx, counted, func(j *Job) (string, bool) { return why, instances[j.Holder.instance()] })
}

// release gives back the held jobs that reason names (with the reason),
// by one released row. It walks the held jobs only (State.Held), never
// the waiting ones. Called with l.mu held, while leading, the state
// folded.
func (l *Leader) release(ctx context.Context, counted bool, reason func(*Job) (string, bool)) (int, error) {
	now := l.Now().UnixMicro()
	var items []Item
	for _, held := range l.state.Held {
		for ref := range held {
			j := l.state.Jobs.Get(ref)
			why, ok := reason(j)
			if !ok {
				continue
			}
			it := Item{Group: ref.Group, ID: ref.ID, Attempt: j.Attempt, Executor: j.Holder.Executor, Instance: j.Holder.Instance, Counted: counted, Error: why}
			if counted {
				it.RunAt = now
			}
			items = append(items, it)
		}
	}
	if len(items) == 0 {
		return 0, nil
	}
	// In a stable order: the row is the same whatever the maps'.
	slices.SortFunc(items, func(a, b Item) int {
		return compareRefs(fairway.JobRef{Group: a.Group, ID: a.ID}, fairway.JobRef{Group: b.Group, ID: b.ID})
	})
	read, err := l.appendBatches(ctx, []batch{{kind: Released, items: items}})
	if err != nil {
		return 0, err
	}
	return len(items), l.fold(ctx, read)
}

// The reasons ReleaseLost and ReleaseOverdue give: each is the error of
// the attempt they fail, as users read it in the job's attempts.
const (
	lostSilent     = "executor lost: its lease expired without a heartbeat"
	lostRestarted  = "executor lost: it restarted"
	lostNotRunning = "executor lost: it is no longer registered"
)

// ReleaseLost gives back, counted, the jobs of the instances that the
// executors' registry (fairway_executor, where every coordinator records
// registrations and heartbeats) says are lost: silent for lease, replaced
// by a newer instance of their app-id, or gone, deregistered or never
// registered. An attempt of a lost instance failed; its job is retried now
// unless out of retries. The caller decides when the registry can be
// trusted (PostgreSQL reachable, and the heartbeats recorded, for a
// lease: the coordinator's expiry gate). It returns how many jobs it gave
// back.
func (l *Leader) ReleaseLost(ctx context.Context, lease time.Duration) (int, error) {
	// The registry is read without the leader's lock, which claims and
	// reports wait for: the instances that hold jobs first, then, locked
	// again, only the jobs of those instances are judged. An instance
	// that claimed meanwhile was not in the registry's answer; the next
	// call judges it.
	var holders map[Instance]bool
	if !l.View(func(s *State, _ Lease) {
		holders = make(map[Instance]bool, len(s.Held))
		for in := range s.Held {
			holders[in] = true
		}
	}) {
		return 0, ErrNotLeading
	}
	if len(holders) == 0 {
		return 0, nil
	}
	apps := make([]string, 0, len(holders))
	for in := range holders {
		if !slices.Contains(apps, in.Executor) {
			apps = append(apps, in.Executor)
		}
	}
	type registered struct {
		instance string
		live     bool // live and heard within the lease
	}
	reg := map[string]registered{}
	registry := l.db
	if l.cfg.Registry != nil {
		registry = l.cfg.Registry
	}
	rows, err := registry.Query(ctx, `SELECT app_id, instance, state = 'live' AND last_heartbeat >= now() - $2::interval
FROM fairway_executor WHERE app_id = ANY ($1)`, apps, lease.String())
	if err != nil {
		return 0, fmt.Errorf("reading the executors' registry: %w", err)
	}
	var app string
	var r registered
	if _, err := pgx.ForEachRow(rows, []any{&app, &r.instance, &r.live}, func() error { reg[app] = r; return nil }); err != nil {
		return 0, fmt.Errorf("reading the executors' registry: %w", err)
	}
	if err := l.lockLeading(ctx); err != nil {
		return 0, err
	}
	defer l.unlockLeading()
	return l.release(ctx, true, func(j *Job) (string, bool) {
		h := j.Holder.instance()
		if !holders[h] {
			return "", false
		}
		r, ok := reg[h.Executor]
		switch {
		case !ok:
			return lostNotRunning, true
		case r.instance != h.Instance:
			return lostRestarted, true
		case !r.live:
			return lostSilent, true
		}
		return "", false
	})
}

// MaxHold bounds how long an executor may hold a job it has not started,
// whatever it heartbeats: an executor holds jobs beyond its slots only
// when they are short (executor.Config.Prefetch), so a job held this long
// is held by one that does not run it.
const MaxHold = time.Hour

// ReleaseOverdue gives back, counted, the jobs held past what any attempt
// may take, whatever their executors say (a rogue, or a broken one): a
// started job past its start + its timeout (fairway.MaxTimeout without
// one) + twice lease, one never started past its hand-over + MaxHold, at
// time at (PostgreSQL's clock: Leader.Now). It returns how many jobs it
// gave back.
func (l *Leader) ReleaseOverdue(ctx context.Context, lease time.Duration, at time.Time) (int, error) {
	if err := l.lockLeading(ctx); err != nil {
		return 0, err
	}
	defer l.unlockLeading()
	now := at.UnixMicro()
	return l.release(ctx, true, func(j *Job) (string, bool) { return lostSilent, now > j.deadline(lease) })
}

// instance is the holder's instance.
func (h *Holder) instance() Instance { return Instance{Executor: h.Executor, Instance: h.Instance} }

// deadline is when a held job is overdue (ReleaseOverdue), microseconds
// since the Unix epoch.
func (j *Job) deadline(lease time.Duration) int64 {
	if j.Holder.Started == 0 {
		return j.Holder.Scheduled + MaxHold.Microseconds()
	}
	timeout := fairway.MaxTimeout
	if j.TimeoutS > 0 {
		timeout = time.Duration(j.TimeoutS) * time.Second
	}
	return j.Holder.Started + (timeout + 2*lease).Microseconds()
}

func compareRefs(a, b fairway.JobRef) int {
	return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.ID, b.ID))
}
