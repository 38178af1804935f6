package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// devReportsTimeout bounds how long fairway dev waits, once its
	// executor has stopped, for the coordinator to apply the executor's
	// last reports (its jobs released, their last log lines) before it
	// stops the coordinator and PostgreSQL. They take milliseconds.
	devReportsTimeout = 10 * time.Second
	// devLeftReportsTimeout bounds how long fairway dev waits at its start
	// for the reports its executor left at an earlier stop to be applied,
	// before the executor registers again: a report the earlier
	// coordinator held unacknowledged comes back after the consumers' ack
	// wait (10 s).
	devLeftReportsTimeout = 15 * time.Second
	devReportsPoll        = 20 * time.Millisecond
)

// pendingReports counts the reports of executor appID that wait in the
// results streams: its subject of the shared one, and its own (operator
// mode). The streams are work queues: a report leaves once a coordinator
// has applied it to PostgreSQL.
func pendingReports(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, appID string) (uint64, error) {
	var n uint64
	stream, err := js.Stream(ctx, subjects.ResultStream())
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		return 0, err
	default:
		subject := subjects.Results(appID)
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			return 0, err
		}
		n += info.State.Subjects[subject]
	}
	own, err := js.Stream(ctx, subjects.ExecutorResultStream(appID))
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		return 0, err
	default:
		info, err := own.Info(ctx)
		if err != nil {
			return 0, err
		}
		n += info.State.Msgs
	}
	return n, nil
}

// awaitReports waits until the coordinators have applied every report of
// executor appID that waits in the results stream, at most timeout, and
// returns how many are left (0: all applied). nc must reach the streams
// (in dev, the coordinator's connection).
func awaitReports(nc *nats.Conn, prefix, appID string, timeout time.Duration) (uint64, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	subjects := events.NewSubjects(prefix)
	var left uint64
	for {
		n, err := pendingReports(ctx, js, subjects, appID)
		switch {
		case err == nil:
			left = n
			if n == 0 {
				return 0, nil
			}
		case ctx.Err() != nil:
			return left, nil
		default:
			return left, err
		}
		select {
		case <-ctx.Done():
			return left, nil
		case <-time.After(devReportsPoll):
		}
	}
}

// settleDevReports is what fairway dev does between its executor's stop
// and its coordinator's: it waits for the coordinator to apply the
// executor's last reports, so that the jobs it released are waiting again
// (with no attempt counted) and their last log lines are stored before
// PostgreSQL stops. Left in the stream, they would be applied only at the
// next start, after the executor's new instance had registered and taken
// the jobs for lost ("executor lost: it restarted", an attempt counted).
func (e *env) settleDevReports(connect func(string) (*nats.Conn, error)) {
	appID := executorAppID(e.cfg)
	nc, err := connect("fairway-dev-stop")
	if err != nil {
		e.log.Warn("cannot check that the coordinator applied the executor's last reports", "error", err)
		return
	}
	defer nc.Close()
	start := time.Now()
	left, err := awaitReports(nc, e.cfg.NATS.Prefix, appID, devReportsTimeout)
	switch {
	case err != nil:
		e.log.Warn("cannot check that the coordinator applied the executor's last reports", "error", err)
	case left > 0:
		e.log.Warn(fmt.Sprintf("the coordinator did not apply the executor's last %d reports within %s: they stay in JetStream and are applied at the next start, before the executor registers again", left, devReportsTimeout),
			"executor", appID, "reports", left)
	default:
		e.log.Debug("the coordinator applied the executor's last reports", "executor", appID, "took", time.Since(start).String())
	}
}

// applyLeftDevReports waits, before fairway dev's executor registers, for
// the coordinator to apply the reports its previous run left in JetStream
// (a stop cut short): registered first, the new instance would take the
// jobs those reports release for lost.
func (e *env) applyLeftDevReports(connect func(string) (*nats.Conn, error)) {
	appID := executorAppID(e.cfg)
	warn := func(err error) {
		e.log.Warn("cannot check for reports the executor left at its last stop", "executor", appID, "error", err)
	}
	nc, err := connect("fairway-dev-start")
	if err != nil {
		warn(err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		warn(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), devLeftReportsTimeout)
	defer cancel()
	n, err := pendingReports(ctx, js, events.NewSubjects(e.cfg.NATS.Prefix), appID)
	if err != nil || n == 0 {
		if err != nil {
			warn(err)
		}
		return
	}
	e.log.Info("applying the reports the executor left at its last stop before it registers again", "executor", appID, "reports", n)
	left, err := awaitReports(nc, e.cfg.NATS.Prefix, appID, devLeftReportsTimeout)
	switch {
	case err != nil:
		warn(err)
	case left > 0:
		e.log.Warn(fmt.Sprintf("%d reports the executor left at its last stop are not applied after %s; registering anyway: the jobs they release count as lost", left, devLeftReportsTimeout),
			"executor", appID, "reports", left)
	}
}
