package coordinator

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/proc"
	"github.com/fairwayhq/fairway/internal/store"
)

// Defaults of periodicConfig.
const (
	// periodicMarkStale is how long a coordinator's mark on a periodic task
	// holds: a coordinator that died while firing loses it after this.
	periodicMarkStale = time.Minute
	// periodicMaxSleep caps the wait for the next periodic run, so that a
	// change missed on the wire is seen anyway.
	periodicMaxSleep = time.Minute
	periodicBatch    = 100
)

// periodicConfig configures the periodic firer.
type periodicConfig struct {
	// MarkStale is how long a mark holds. Defaults to periodicMarkStale.
	MarkStale time.Duration
	// MaxSleep caps the wait for the next run. Defaults to
	// periodicMaxSleep.
	MaxSleep time.Duration
	// Batch caps the tasks marked at once. Defaults to periodicBatch.
	Batch int
	// Retries is the max_retries of the jobs fired (Config.Retries).
	Retries int
}

func (c periodicConfig) withDefaults() periodicConfig {
	if c.MarkStale <= 0 {
		c.MarkStale = periodicMarkStale
	}
	if c.MaxSleep <= 0 {
		c.MaxSleep = periodicMaxSleep
	}
	if c.Batch <= 0 {
		c.Batch = periodicBatch
	}
	return c
}

// periodicFirer fires the periodic tasks when their time comes, on the
// coordinator that leads the maintenance (a leader service: it starts
// with the lead, and fires what is due at once).
type periodicFirer struct {
	cfg periodicConfig
	serviceBase
	// id names this coordinator in the tasks' marks (coordinatorID).
	id string
	// now is the time periodic tasks follow (Coordinator.periodicNow).
	now func(context.Context) (time.Time, error)
	// kickOutbox publishes the fired and skipped events (relay.kick).
	kickOutbox func()
	// journal holds the unfinished jobs (Coordinator.onJournal sets it):
	// a task's last job is looked for in its state, a new one appended.
	parts partitions
	kicks chan struct{}
}

func newPeriodicFirer(cfg periodicConfig, b serviceBase, id string,
	now func(context.Context) (time.Time, error), kickOutbox func()) *periodicFirer {
	return &periodicFirer{
		cfg: cfg.withDefaults(), serviceBase: b, id: id, now: now,
		kickOutbox: kickOutbox, kicks: make(chan struct{}, 1),
	}
}

// kick makes the periodic loop look again (a task changed).
func (f *periodicFirer) kick() {
	select {
	case f.kicks <- struct{}{}:
	default:
	}
}

// run fires the periodic tasks when their time comes, until ctx ends: it
// sleeps until the earliest nextrun (at most MaxSleep), or until a
// periodic task changes.
func (f *periodicFirer) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-f.kicks:
		}
		f.fire(ctx)
		wait := f.untilNext(ctx)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// untilNext is how long to sleep until the next periodic run is due, at
// most MaxSleep.
func (f *periodicFirer) untilNext(ctx context.Context) time.Duration {
	next, ok, err := f.store.NextPeriodicRun(ctx)
	var now time.Time
	if err == nil && ok {
		now, err = f.now(ctx)
	}
	switch {
	case err != nil:
		if ctx.Err() == nil {
			f.log.Warn("reading the next periodic run", "error", err)
		}
	case ok:
		return min(max(next.Sub(now), 0), f.cfg.MaxSleep)
	}
	return f.cfg.MaxSleep
}

// fire fires every periodic task due now. Marking in PostgreSQL makes
// sure one coordinator fires a task for a due time; runs missed while no
// coordinator ran collapse into one, since the next run is the first
// event after now.
func (f *periodicFirer) fire(ctx context.Context) {
	now, err := f.now(ctx)
	var due []store.PeriodicTask
	if err == nil {
		due, err = f.store.MarkDuePeriodic(ctx, f.id, now, f.cfg.MarkStale, f.cfg.Batch)
	}
	if err != nil {
		if ctx.Err() == nil {
			f.log.Warn("marking due periodic tasks", "error", err)
		}
		return
	}
	for _, p := range due {
		_, next, err := nextRun(p.Timer, now)
		if err != nil {
			f.log.Error("periodic task disabled", "periodic", p.ID, "timer", p.Timer, "reason", err)
			if err := f.store.UnmarkPeriodic(ctx, f.id, p.ID, p.NextRun, false); err != nil {
				f.log.Warn("unmarking a periodic task", "periodic", p.ID, "error", err)
			}
			continue
		}
		fired, err := f.firePeriodic(ctx, p, next)
		switch {
		case err != nil:
			f.log.Warn("firing a periodic task; trying again when its mark goes stale", "periodic", p.ID, "error", err)
		case fired == nil:
			f.log.Info("periodic task taken over by another coordinator", "periodic", p.ID)
		case fired.Skipped:
			f.log.Info("periodic task skipped: its previous job has not ended", "periodic", p.ID, "job_id", fired.JobID, "next_run", next)
		default:
			f.log.Info("periodic task fired", "periodic", p.ID, "job_id", fired.JobID, "next_run", next)
			f.parts.of(p.Group).leader.Wake() // the leader reads the job from the tail
		}
		f.kickOutbox()
	}
}

// firePeriodic fires p's job, unless its last one, which the partition's
// state holds, has not ended.
func (f *periodicFirer) firePeriodic(ctx context.Context, p store.PeriodicTask, next time.Time) (*store.Fired, error) {
	e := f.parts.of(p.Group)
	previous, err := e.leader.TrackerHolder(ctx, p.Group, p.ID)
	if err != nil {
		return nil, journalError(err)
	}
	return f.store.FirePeriodic(ctx, f.id, p, fairway.NewID(), f.cfg.Retries, next, previous, e.store)
}

// clearDeadMarks clears the periodic task marks left by coordinators that
// ran on this host and are gone (this one's previous run, say): their
// tasks need not wait for the marks to go stale.
func (f *periodicFirer) clearDeadMarks(ctx context.Context) error {
	host, _ := os.Hostname()
	tasks, err := f.store.ListPeriodic(ctx)
	if err != nil {
		return err
	}
	for _, p := range tasks {
		parts := strings.Split(p.MarkedBy, "/")
		if p.Marked == nil || len(parts) != 3 || parts[0] != host {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || pid == os.Getpid() || proc.Alive(pid) {
			continue
		}
		if err := f.store.UnmarkPeriodic(ctx, p.MarkedBy, p.ID, p.NextRun, p.Enabled); err != nil {
			return err
		}
		f.log.Warn("cleared the mark of a periodic task left by a coordinator that is gone", "periodic", p.ID, "coordinator", p.MarkedBy)
	}
	return nil
}
