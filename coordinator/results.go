package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/store"
	"github.com/nats-io/nats.go/jetstream"
)

// retryAfterOutage is how long a message waits in JetStream before it is
// tried again when PostgreSQL is unavailable.
const retryAfterOutage = 2 * time.Second

// resultBatch caps the executor reports applied in one go.
const resultBatch = 1000

// startResults consumes executors' reports and applies them in batches.
func (c *Coordinator) startResults(ctx context.Context) error {
	return c.consume(ctx, c.subjects.ResultStream(), "results", resultBatch, c.applyReports)
}

// applyReports applies a batch in report order per job: starts, then
// progress and logs, then outcomes.
func (c *Coordinator) applyReports(ctx context.Context, msgs []jetstream.Msg) {
	var started []store.Attempt
	var progress []store.Progress
	var logs []store.AttemptLog
	var outcomes []store.Outcome
	var reports []events.Report
	for _, msg := range msgs {
		batch, err := events.DecodeReports(msg.Data())
		if err != nil {
			c.log.Warn("dropping an undecodable executor report", "subject", msg.Subject(), "error", err)
			continue
		}
		// The subject is the executor's identity: in operator mode its
		// credential publishes under its own app-id only.
		appID, ok := c.subjects.ParseResults(msg.Subject())
		if !ok {
			c.log.Warn("dropping executor reports on a malformed subject", "subject", msg.Subject())
			continue
		}
		for _, r := range batch {
			if r.Executor != "" && r.Executor != appID {
				c.log.Warn("dropping an executor report about another executor's job", "subject", msg.Subject(),
					"executor", appID, "names", r.Executor, "job_id", r.JobID)
				continue
			}
			r.Executor = appID
			reports = append(reports, r)
		}
	}
	// A start reported in the same batch as its end is recorded with the
	// end: one row write instead of two.
	startedAt := map[store.Attempt]time.Time{}
	ended := map[store.Attempt]bool{}
	// A report names its job by group and id, and its sender by app-id and
	// instance: the store applies it only where they hold the attempt.
	attempt := func(r events.Report) store.Attempt {
		return store.Attempt{Group: r.Group, JobID: r.JobID, Attempt: r.Attempt, Worker: r.Executor, Instance: r.Instance}
	}
	for _, r := range reports {
		a := attempt(r)
		switch r.Type {
		case events.ReportStarted:
			startedAt[a] = r.Time
		case events.ReportDone:
			ended[a] = true
		}
	}
	for _, r := range reports {
		a := attempt(r)
		switch r.Type {
		case events.ReportStarted:
			if !ended[a] {
				started = append(started, a)
			}
		case events.ReportProgress:
			progress = append(progress, store.Progress{Attempt: a, Progress: r.Progress})
		case events.ReportLog:
			// The lines are the report's job's and attempt's, whatever they say.
			logs = append(logs, store.AttemptLog{Attempt: a, Lines: r.Logs})
		case events.ReportDone:
			o := store.Outcome{Attempt: a, Kind: r.Outcome, Result: r.Result, Error: r.Error}
			if t, ok := startedAt[a]; ok {
				o.StartedAt = &t
			}
			outcomes = append(outcomes, o)
		default:
			c.log.Warn("dropping an executor report of unknown type", "type", r.Type, "executor", r.Executor)
		}
	}
	applied, err := c.applyReportParts(ctx, started, progress, logs, outcomes)
	if err != nil {
		c.retryLater(ctx, msgs, err)
		return
	}
	for _, msg := range msgs {
		_ = msg.Ack()
	}
	if len(started) > 0 {
		c.kickOutbox()
	}
	c.afterChange(applied)
}

func (c *Coordinator) applyReportParts(ctx context.Context, started []store.Attempt, progress []store.Progress, logs []store.AttemptLog, outcomes []store.Outcome) ([]store.Applied, error) {
	if err := c.store.MarkRunning(ctx, started); err != nil {
		return nil, err
	}
	if err := c.store.SetProgress(ctx, progress); err != nil {
		return nil, err
	}
	if err := c.store.AppendLogs(ctx, logs); err != nil && errors.Is(err, fairway.ErrUnavailable) {
		return nil, err
	} else if err != nil {
		c.log.Warn("dropping job log lines PostgreSQL refused", "reports", len(logs), "error", err)
	}
	applied, err := c.store.Complete(ctx, outcomes, c.cfg.RetryDelay)
	if err != nil {
		return nil, err
	}
	if n := len(outcomes) - len(applied); n > 0 {
		c.log.Info("ignored outcomes of attempts that are no longer current (late results), or not held by their sender", "count", n)
	}
	return applied, nil
}
