package coordinator

import (
	"context"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/calendar"
)

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

// nextRun parses a timer (a calendar event or a cron expression) and
// returns its first time after after.
func nextRun(timer string, after time.Time) (calendar.Timer, time.Time, error) {
	t, err := calendar.ParseTimer(timer)
	if err != nil {
		return nil, time.Time{}, fairway.Invalid("timer", "%v", err)
	}
	next, ok := t.Next(after)
	if !ok {
		return nil, time.Time{}, fairway.Invalid("timer", "timer %q has no time after %s", timer, after.Format(time.RFC3339))
	}
	return t, next, nil
}

// periodicChanged wakes the periodic loops of every coordinator.
func (c *Coordinator) periodicChanged() {
	c.periodic.kick()
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
		return p, fairway.Invalid("timer", "missing: a calendar event such as \"*-*-* 08:00\" or a cron expression such as \"0 8 * * 1-5\"")
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
