package coordinator

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/calendar"
	"github.com/fairwayhq/fairway/store"
)

const (
	// periodicMarkStale is how long a coordinator's mark on a periodic task
	// holds: a coordinator that died while firing loses it after this.
	periodicMarkStale = time.Minute
	// periodicMaxSleep caps the wait for the next periodic run, so that a
	// change missed on the wire is seen anyway.
	periodicMaxSleep = time.Minute
	periodicBatch    = 100
)

// periodicLoop fires the periodic tasks when their time comes: it sleeps
// until the earliest nextrun (at most periodicMaxSleep), or until a
// periodic task changes.
func (c *Coordinator) periodicLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-c.periodicKick:
		}
		if c.lead.leads.Load() { // the others sleep; gaining the lead kicks this loop
			c.firePeriodic(ctx)
		}
		wait := periodicMaxSleep
		next, ok, err := c.store.NextPeriodicRun(ctx)
		var now time.Time
		if err == nil && ok {
			now, err = c.periodicNow(ctx)
		}
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("reading the next periodic run", "error", err)
			}
		} else if ok {
			wait = min(max(next.Sub(now), 0), periodicMaxSleep)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// firePeriodic fires every periodic task due now. Marking in PostgreSQL
// makes sure one coordinator fires a task for a due time; runs missed
// while no coordinator ran collapse into one, since the next run is the
// first event after now.
func (c *Coordinator) firePeriodic(ctx context.Context) {
	now, err := c.periodicNow(ctx)
	var due []store.PeriodicTask
	if err == nil {
		due, err = c.store.MarkDuePeriodic(ctx, c.id, now, periodicMarkStale, periodicBatch)
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("marking due periodic tasks", "error", err)
		}
		return
	}
	for _, p := range due {
		_, next, err := nextRun(p.Timer, now)
		if err != nil {
			c.log.Error("periodic task disabled", "periodic", p.ID, "timer", p.Timer, "reason", err)
			if err := c.store.UnmarkPeriodic(ctx, c.id, p.ID, p.NextRun, false); err != nil {
				c.log.Warn("unmarking a periodic task", "periodic", p.ID, "error", err)
			}
			continue
		}
		fired, err := c.store.FirePeriodic(ctx, c.id, p, fairway.NewID(), *c.cfg.Retries, next)
		switch {
		case err != nil:
			c.log.Warn("firing a periodic task; trying again when its mark goes stale", "periodic", p.ID, "error", err)
		case fired == nil:
			c.log.Info("periodic task taken over by another coordinator", "periodic", p.ID)
		case fired.Skipped:
			c.log.Info("periodic task skipped: its previous job has not ended", "periodic", p.ID, "job_id", fired.JobID, "next_run", next)
		default:
			c.log.Info("periodic task fired", "periodic", p.ID, "job_id", fired.JobID, "next_run", next)
			c.afterChange(fired.Applied)
		}
		c.kickOutbox()
	}
}

// clearDeadMarks clears the periodic task marks left by coordinators that
// ran on this host and are gone (this one's previous run, say): their
// tasks need not wait for the marks to go stale.
func (c *Coordinator) clearDeadMarks(ctx context.Context) error {
	host, _ := os.Hostname()
	tasks, err := c.store.ListPeriodic(ctx)
	if err != nil {
		return err
	}
	for _, p := range tasks {
		parts := strings.Split(p.Worker, "/")
		if p.Marked == nil || len(parts) != 3 || parts[0] != host {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		if err := c.store.UnmarkPeriodic(ctx, p.Worker, p.ID, p.NextRun, p.Enabled); err != nil {
			return err
		}
		c.log.Warn("cleared the mark of a periodic task left by a coordinator that is gone", "periodic", p.ID, "coordinator", p.Worker)
	}
	return nil
}

// processAlive says whether a process with this pid runs on this host.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// kickPeriodic makes the periodic loop look again (a task changed).
func (c *Coordinator) kickPeriodic() {
	select {
	case c.periodicKick <- struct{}{}:
	default:
	}
}

// savePeriodic validates and stores a periodic task; nextrun is the first
// time of its timer after now (or now, with runNow).
func (c *Coordinator) savePeriodic(ctx context.Context, p fairway.PeriodicTask, received time.Time) (*fairway.PeriodicTask, error) {
	if err := fairway.CheckName("id", p.ID); err != nil {
		return nil, err
	}
	sub := fairway.Submission{Task: p.Task, Group: p.Group, Args: p.Args, Subject: p.Subject, Submitter: p.Submitter, Priority: p.Priority}
	if err := sub.Normalize("", "", c.cfg.MaxArgsSize, 0); err != nil {
		return nil, err
	}
	if err := c.tasks.check(ctx, sub.Task, received); err != nil {
		return nil, err
	}
	now, err := c.periodicNow(ctx)
	if err != nil {
		return nil, err
	}
	ev, next, err := nextRun(p.Timer, now)
	if err != nil {
		return nil, err
	}
	p.Args, p.Priority, p.Timer, p.NextRun = sub.Args, sub.Priority, ev.String(), next
	saved, err := c.store.SavePeriodic(ctx, p)
	if err != nil {
		return nil, err
	}
	c.periodicChanged()
	return saved, nil
}

// setPeriodic enables, disables or runs now a periodic task.
func (c *Coordinator) setPeriodic(ctx context.Context, id string, enabled, runNow bool) (*fairway.PeriodicTask, error) {
	p, err := c.store.GetPeriodic(ctx, id)
	if err != nil {
		return nil, err
	}
	p.Enabled = enabled
	now, err := c.periodicNow(ctx)
	if err != nil {
		return nil, err
	}
	if runNow {
		p.NextRun = now
	} else if enabled {
		_, next, err := nextRun(p.Timer, now)
		if err != nil {
			return nil, err
		}
		p.NextRun = next
	}
	saved, err := c.store.SavePeriodic(ctx, *p)
	if err != nil {
		return nil, err
	}
	c.periodicChanged()
	return saved, nil
}

// nextRun parses a timer and returns its first time after after.
func nextRun(timer string, after time.Time) (*calendar.Event, time.Time, error) {
	ev, err := calendar.Parse(timer)
	if err != nil {
		return nil, time.Time{}, fairway.Invalid("timer", "%v", err)
	}
	next, ok := ev.Next(after)
	if !ok {
		return nil, time.Time{}, fairway.Invalid("timer", "calendar event %q has no time after %s", timer, after.Format(time.RFC3339))
	}
	return ev, next, nil
}

// periodicChanged wakes the periodic loops of every coordinator.
func (c *Coordinator) periodicChanged() {
	c.kickPeriodic()
	if err := c.nc.Publish(c.subjects.NotifyPeriodic(), nil); err != nil {
		c.log.Debug("publishing a periodic change", "error", err)
	}
}

// decodePeriodic reads a periodic task from a request body, strictly.
func decodePeriodic(data []byte) (fairway.PeriodicTask, error) {
	var p fairway.PeriodicTask
	if err := decode(data, &p); err != nil {
		return p, err
	}
	if p.Timer == "" {
		return p, fairway.Invalid("timer", "missing: a calendar event such as \"*-*-* 08:00\"")
	}
	return p, nil
}

// periodicNow is the time periodic tasks follow: PostgreSQL's clock, not
// this host's, so that a coordinator whose clock is wrong (an NTP step, a
// bad RTC) neither fires calendar timers early or late nor sets a nextrun
// that the other coordinators would wait out.
func (c *Coordinator) periodicNow(ctx context.Context) (time.Time, error) {
	if c.cfg.Clock != nil {
		return c.cfg.Clock(), nil
	}
	return c.store.Now(ctx)
}

// hostNow is this coordinator's host clock (see Config.HostClock).
func (c *Coordinator) hostNow() time.Time {
	if c.cfg.HostClock != nil {
		return c.cfg.HostClock()
	}
	return time.Now()
}

// handlePeriodic answers the periodic-* verbs of the operator API.
func (c *Coordinator) handlePeriodic(ctx context.Context, verb string, data []byte, received time.Time) ([]fairway.PeriodicTask, error) {
	if verb == events.VerbPeriodicList {
		return c.store.ListPeriodic(ctx)
	}
	var one *fairway.PeriodicTask
	var err error
	if verb == events.VerbPeriodicSave {
		p, derr := decodePeriodic(data)
		if derr != nil {
			return nil, derr
		}
		one, err = c.savePeriodic(ctx, p, received)
	} else {
		var req events.JobRequest
		if err := decode(data, &req); err != nil {
			return nil, err
		}
		if req.ID == "" {
			return nil, fairway.Invalid("id", "missing: name the periodic task")
		}
		switch verb {
		case events.VerbPeriodicEnable:
			one, err = c.setPeriodic(ctx, req.ID, true, false)
		case events.VerbPeriodicDisable:
			one, err = c.setPeriodic(ctx, req.ID, false, false)
		case events.VerbPeriodicRunNow:
			one, err = c.setPeriodic(ctx, req.ID, true, true)
		default:
			err = c.store.DeletePeriodic(ctx, req.ID)
			c.periodicChanged()
		}
	}
	if err != nil || one == nil {
		return nil, err
	}
	return []fairway.PeriodicTask{*one}, nil
}
