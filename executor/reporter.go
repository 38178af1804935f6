package executor

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/wirejson"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	reportMaxPending = 4096             // asynchronous publishes in flight
	reportAckTimeout = 10 * time.Second // a publish not acknowledged by then is retried
	reportRetryDelay = time.Second      // pause before a failed report is sent again
	reportWarnEvery  = 10 * time.Second // at most one "report failed" warning per period
	reportBatchBytes = 256 << 10        // reports sent in one message, at most
)

// reporter publishes reports to JetStream asynchronously, with a bounded
// number in flight, and sends again those that fail. Every report carries a
// unique Nats-Msg-Id, so a report that was stored although its
// acknowledgement got lost is not stored twice when sent again.
type reporter struct {
	js      jetstream.JetStream
	subject string
	stream  string
	idBase  string
	seq     atomic.Uint64
	logger  *slog.Logger

	qmu    sync.Mutex
	queue  []events.Report // published, not yet sent
	kick   chan struct{}   // capacity 1: the queue is not empty
	sendMu sync.Mutex      // one sender at a time keeps reports in order

	mu       sync.Mutex
	retrying int           // reports waiting to be sent again
	changed  chan struct{} // capacity 1: retrying went down
	closed   bool          // flush has ended: failures are dropped
	warnedAt time.Time
	failures int // since the last warning
}

func newReporter(nc *nats.Conn, subject, stream string, logger *slog.Logger) (*reporter, error) {
	r := &reporter{
		subject: subject,
		stream:  stream,
		idBase:  uuid.NewString() + "-",
		logger:  logger,
		changed: make(chan struct{}, 1),
		kick:    make(chan struct{}, 1),
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(reportMaxPending),
		jetstream.WithPublishAsyncTimeout(reportAckTimeout),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, msg *nats.Msg, err error) { r.failed(msg, err) }),
	)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	r.js = js
	return r, nil
}

// publish queues a report. The reports queued while the previous message
// was being sent go out together, as one message holding a JSON array: at
// low load each report leaves at once, under load they batch by themselves.
// Failures are logged and retried in the background.
func (r *reporter) publish(rep events.Report) {
	r.qmu.Lock()
	r.queue = append(r.queue, rep)
	r.qmu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run sends the queued reports until stop is closed.
func (r *reporter) run(stop <-chan struct{}) {
	for {
		select {
		case <-r.kick:
			r.sendQueued()
		case <-stop:
			r.sendQueued()
			return
		}
	}
}

// sendQueued sends every queued report, in order, in messages of at most
// reportBatchBytes.
func (r *reporter) sendQueued() {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.qmu.Lock()
	queue := r.queue
	r.queue = nil
	r.qmu.Unlock()
	var buf []byte
	flush := func() {
		if len(buf) == 0 {
			return
		}
		msg := &nats.Msg{Subject: r.subject, Data: append(buf, ']'), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, r.idBase+strconv.FormatUint(r.seq.Add(1), 10))
		r.send(msg)
		buf = nil
	}
	for _, rep := range queue {
		data, err := wirejson.Marshal(rep)
		if err != nil {
			r.logger.Error("encoding a report; dropping it", "job_id", rep.JobID, "type", rep.Type, "error", err)
			continue
		}
		if len(buf) > 0 && len(buf)+len(data) > reportBatchBytes {
			flush()
		}
		if len(buf) == 0 {
			buf = append(buf, '[')
		} else {
			buf = append(buf, ',')
		}
		buf = append(buf, data...)
	}
	flush()
}

func (r *reporter) send(msg *nats.Msg) {
	if _, err := r.js.PublishMsgAsync(msg); err != nil {
		r.failed(msg, err)
	}
}

// failed handles a report that JetStream did not store: it is sent again
// after a pause, unless it never can be or flush has given up.
func (r *reporter) failed(msg *nats.Msg, err error) {
	if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum) || errors.Is(err, nats.ErrConnectionClosed) {
		r.logger.Error("report cannot be sent; dropping it", "subject", msg.Subject, "bytes", len(msg.Data), "error", err)
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.logger.Error("report not acknowledged after shutdown; dropping it", "subject", msg.Subject, "error", err)
		return
	}
	r.retrying++
	r.failures++
	warn := time.Since(r.warnedAt) >= reportWarnEvery
	failures := r.failures
	if warn {
		r.warnedAt = time.Now()
		r.failures = 0
	}
	r.mu.Unlock()
	if warn {
		r.logger.Warn("sending a report to JetStream failed; retrying", "subject", msg.Subject, "failures", failures, "error", err)
	}
	time.AfterFunc(reportRetryDelay, func() {
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if !closed {
			r.send(msg)
		}
		r.mu.Lock()
		r.retrying--
		r.mu.Unlock()
		if closed {
			r.logger.Error("report not sent before shutdown; dropping it", "subject", msg.Subject)
		}
		select {
		case r.changed <- struct{}{}:
		default:
		}
	})
}

// flush waits until every report is acknowledged or being retried no more,
// at most timeout; then later failures are dropped.
func (r *reporter) flush(timeout time.Duration) error {
	r.sendQueued()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	defer func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
	}()
	for {
		select {
		case <-r.js.PublishAsyncComplete():
		case <-deadline.C:
			return r.unflushed(timeout)
		}
		// A retry sends before it counts itself done, so when none is
		// counted its publish is already pending, if any.
		r.mu.Lock()
		retrying := r.retrying
		r.mu.Unlock()
		if retrying == 0 {
			if r.js.PublishAsyncPending() == 0 {
				return nil
			}
			continue
		}
		select {
		case <-r.changed:
		case <-deadline.C:
			return r.unflushed(timeout)
		}
	}
}

func (r *reporter) unflushed(timeout time.Duration) error {
	r.mu.Lock()
	n := r.retrying
	r.mu.Unlock()
	n += r.js.PublishAsyncPending()
	return fmt.Errorf("%d reports not acknowledged by JetStream within %s (does stream %s exist? coordinators create it)", n, timeout, r.stream)
}
