// Package demo holds the built-in tasks that `fairway dev` and
// `fairway executor` run: enough to try Fairway without writing code.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/executor"
)

// Register adds the demo tasks to an executor:
//
//	echo   returns its args as the result.
//	sleep  {"seconds": 2.5} sleeps, reporting progress; cancellable.
//	fail   {"times": 2} fails the first 2 attempts, then succeeds;
//	       {"permanent": true} fails without retries.
//	panic  panics (a failed attempt, not a dead executor).
//	snooze {"times": 2, "seconds": 3} snoozes its first 2 runs for 3 s
//	       each (no failure counted), then succeeds.
//
// Every attempt goes through the Timing middleware.
func Register(e *executor.Executor) {
	e.Use(Timing)
	for _, t := range tasks {
		e.Handle(t.name, t.handler)
	}
}

// tasks are the demo tasks, in the order the help lists them.
var tasks = []struct {
	name    string
	handler executor.Handler
}{{"echo", Echo}, {"sleep", Sleep}, {"fail", Fail}, {"panic", Panic}, {"snooze", SnoozeTask}}

// Tasks lists the names of the demo tasks, for the commands' help.
func Tasks() []string {
	names := make([]string, len(tasks))
	for i, t := range tasks {
		names[i] = t.name
	}
	return names
}

// Timing is the demo's middleware: it writes to the job's log when an
// attempt begins and when it ends, with how long it took and its error.
func Timing(next executor.Handler) executor.Handler {
	return func(ctx context.Context, job *executor.Job) error {
		start := time.Now()
		job.Logger.Debug("attempt begins", "attempt", job.Attempt)
		err := next(ctx, job)
		if err != nil {
			job.Logger.Info("attempt ends", "duration", time.Since(start).Round(time.Microsecond).String(), "error", err.Error())
		} else {
			job.Logger.Info("attempt ends", "duration", time.Since(start).Round(time.Microsecond).String())
		}
		return err
	}
}

// Echo returns its args as the result.
func Echo(_ context.Context, job *executor.Job) error {
	job.Logger.Info("echo", "bytes", len(job.Args))
	return job.SetResult(job.Args)
}

// Sleep sleeps for args.seconds (default 1), reporting progress.
func Sleep(ctx context.Context, job *executor.Job) error {
	var args struct {
		Seconds *float64 `json:"seconds"`
	}
	if err := job.Bind(&args); err != nil {
		return fairway.Permanent(fmt.Errorf("args: %w", err))
	}
	d := time.Second
	if args.Seconds != nil {
		if *args.Seconds < 0 {
			return fairway.Permanent(errors.New("args.seconds must not be negative"))
		}
		d = time.Duration(*args.Seconds * float64(time.Second))
	}
	job.Logger.Info("sleeping", "duration", d.String())
	const steps = 10
	for i := 1; i <= steps; i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d / steps):
		}
		job.SetProgress(i * 100 / steps)
	}
	return job.SetResult(map[string]any{"slept": d.String()})
}

// Fail fails the first args.times attempts, or every attempt permanently
// with args.permanent.
func Fail(_ context.Context, job *executor.Job) error {
	var args struct {
		Times     int  `json:"times"`
		Permanent bool `json:"permanent"`
	}
	if err := job.Bind(&args); err != nil {
		return fairway.Permanent(fmt.Errorf("args: %w", err))
	}
	if args.Permanent {
		return fairway.Permanent(errors.New("failing permanently, as asked"))
	}
	if job.Attempt <= args.Times {
		job.Logger.Warn("failing on purpose", "attempt", job.Attempt, "times", args.Times)
		return fmt.Errorf("attempt %d of the first %d fails, as asked", job.Attempt, args.Times)
	}
	return job.SetResult(json.RawMessage(fmt.Sprintf(`{"attempts":%d}`, job.Attempt)))
}

// Panic panics.
func Panic(context.Context, *executor.Job) error {
	panic("the panic task panics, as asked")
}

// SnoozeTask snoozes its first args.times runs (default 1) for
// args.seconds (default 1) each, then succeeds: a snooze re-runs the job
// later without counting a failure, though each run counts an attempt.
func SnoozeTask(_ context.Context, job *executor.Job) error {
	var args struct {
		Times   *int     `json:"times"`
		Seconds *float64 `json:"seconds"`
	}
	if err := job.Bind(&args); err != nil {
		return fairway.Permanent(fmt.Errorf("args: %w", err))
	}
	times, d := 1, time.Second
	if args.Times != nil {
		times = *args.Times
	}
	if args.Seconds != nil {
		if *args.Seconds <= 0 {
			return fairway.Permanent(errors.New("args.seconds must be positive"))
		}
		d = time.Duration(*args.Seconds * float64(time.Second))
	}
	if job.Attempt <= times {
		job.Logger.Info("snoozing", "run", job.Attempt, "for", d.String())
		return fairway.Snooze(d)
	}
	return job.SetResult(map[string]any{"runs": job.Attempt})
}
