package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/wirejson"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	reportAckTimeout    = 2 * time.Second       // a publish not acknowledged by then is sent again, under its Nats-Msg-Id: a lost acknowledgement holds the reports behind it no longer
	reportRetryFirst    = 10 * time.Millisecond // pause before the first retry of a refused or lost message
	reportRetryMax      = time.Second           // the pauses double up to this
	reportWarnEvery     = 10 * time.Second      // at most one "report failed" warning per period
	reportBatchBytesMax = 256 << 10             // reports sent in one message, at most
)

// reporter sends the executor's reports to JetStream, in order, one
// message at a time: the reports queued while a message waits for its
// acknowledgement go together in the next one (a JSON array of them, up
// to reportBatchBytesMax). At low load each report leaves at once; under
// load the messages grow rather than multiply, so that an honest
// executor's reports stay a few messages in the stream however many slots
// it runs, far from the per-executor bound that stops a flood
// (events.ResultMaxMsgsPerExecutor).
//
// A message the stream refused (its share of the stream full: the
// coordinators are behind) is not stored: its reports go back to the head
// of the queue and leave with those queued since, in as few messages as
// they fit, after a pause that starts short (reportRetryFirst) and doubles.
// A message whose acknowledgement did not come may have been stored: it is
// sent again as it was, under its Nats-Msg-Id, so that JetStream drops it
// if it had.
type reporter struct {
	js      jetstream.JetStream
	subject string
	stream  string
	idBase  string
	logger  *slog.Logger

	mu    sync.Mutex
	queue []events.Report // published, not in a message yet
	kick  chan struct{}   // capacity 1: the queue gained a report

	// The sender's own (one sender at a time: sendMu).
	sendMu     sync.Mutex
	seq        uint64
	unacked    *outMessage // sent, neither acknowledged nor refused
	batchBytes int         // lowered when the server refuses a message's size
	delay      time.Duration
	warnedAt   time.Time
	failures   int // since the last warning
}

// outMessage is a message of reports and the reports it carries.
type outMessage struct {
	msg     *nats.Msg
	reports []events.Report
}

func newReporter(nc *nats.Conn, subject, stream string, logger *slog.Logger) (*reporter, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	return &reporter{
		js:         js,
		subject:    subject,
		stream:     stream,
		idBase:     uuid.NewString() + "-",
		logger:     logger,
		kick:       make(chan struct{}, 1),
		batchBytes: reportBatchBytesMax,
	}, nil
}

// publish queues a report; the sender (run, then flush) sends it.
func (r *reporter) publish(rep events.Report) {
	r.mu.Lock()
	r.queue = append(r.queue, rep)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run sends the queued reports until stop is closed; flush sends what is
// left.
func (r *reporter) run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	for {
		select {
		case <-r.kick:
			_ = r.drain(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// flush sends every report queued or not yet acknowledged, waiting at most
// timeout; what is left then is dropped, and said.
func (r *reporter) flush(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if r.drain(ctx) == nil {
		return nil
	}
	r.mu.Lock()
	n := len(r.queue)
	r.mu.Unlock()
	if r.unacked != nil {
		n += len(r.unacked.reports)
	}
	return fmt.Errorf("%d reports not acknowledged by JetStream within %s (does stream %s exist? coordinators create it)", n, timeout, r.stream)
}

// drain sends until nothing is queued or unacknowledged, pausing after
// each failure, or until ctx ends (its error).
func (r *reporter) drain(ctx context.Context) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	for {
		if r.unacked == nil && !r.next() {
			return nil
		}
		if err := r.sendUnacked(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.failed(err)
			select {
			case <-time.After(r.delay):
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		r.delay = 0
	}
}

// next makes the next message from the head of the queue, as many
// reports as fit in batchBytes (one at least); false when the queue is
// empty. A report that cannot be encoded is dropped, and said.
func (r *reporter) next() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	buf := []byte{'['}
	n := 0
	for n < len(r.queue) {
		data, err := wirejson.Marshal(r.queue[n])
		if err != nil {
			r.logger.Error("encoding a report; dropping it", "job_id", r.queue[n].JobID, "type", r.queue[n].Type, "error", err)
			r.queue = append(r.queue[:n], r.queue[n+1:]...)
			continue
		}
		if n > 0 && len(buf)+len(data)+1 > r.batchBytes {
			break
		}
		if n > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, data...)
		n++
	}
	if n == 0 {
		return false
	}
	r.seq++
	msg := &nats.Msg{Subject: r.subject, Data: append(buf, ']'), Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, r.idBase+strconv.FormatUint(r.seq, 10))
	r.unacked = &outMessage{msg: msg, reports: r.queue[:n:n]}
	r.queue = r.queue[n:]
	return true
}

// sendUnacked publishes the unacknowledged message and waits for its
// acknowledgement. A refused message goes back to the queue; one too
// large for the server is split, or dropped when it holds one report.
func (r *reporter) sendUnacked(ctx context.Context) error {
	out := r.unacked
	pctx, cancel := context.WithTimeout(ctx, reportAckTimeout)
	defer cancel()
	_, err := r.js.PublishMsg(pctx, out.msg)
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		r.unacked = nil
		return nil
	case errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum):
		r.unacked = nil
		if len(out.reports) == 1 {
			r.logger.Error("report cannot be sent: larger than the server takes; dropping it", "subject", out.msg.Subject, "bytes", len(out.msg.Data), "job_id", out.reports[0].JobID, "type", out.reports[0].Type, "error", err)
			return nil
		}
		r.batchBytes = max(len(out.msg.Data)/2, 1)
		r.requeue(out.reports)
		return nil
	case errors.Is(err, nats.ErrConnectionClosed):
		// Closed for good (nats.go does not reconnect a closed
		// connection): nothing queued can go.
		r.mu.Lock()
		n := len(out.reports) + len(r.queue)
		r.queue = nil
		r.mu.Unlock()
		r.unacked = nil
		r.logger.Error("reports cannot be sent: the NATS connection is closed; dropping them", "subject", out.msg.Subject, "reports", n)
		return nil
	case errors.As(err, &apiErr):
		// Refused by the stream (its limits): not stored. Its reports go
		// out again with those queued since.
		r.unacked = nil
		r.requeue(out.reports)
		return err
	default:
		// No answer (a timeout, a connection lost): perhaps stored. Sent
		// again as it is, its Nats-Msg-Id telling JetStream it is the same.
		return err
	}
}

// requeue puts reports back at the head of the queue, in their order.
func (r *reporter) requeue(reports []events.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue = append(reports, r.queue...)
}

// failed counts a failure, warns at most every reportWarnEvery, and sets
// the pause before the next try.
func (r *reporter) failed(err error) {
	r.delay = min(max(2*r.delay, reportRetryFirst), reportRetryMax)
	r.failures++
	if time.Since(r.warnedAt) < reportWarnEvery {
		return
	}
	r.logger.Warn("sending reports to JetStream failed; they are kept and sent again", "subject", r.subject, "failures", r.failures, "retry_in", r.delay.String(), "error", err)
	r.warnedAt = time.Now()
	r.failures = 0
}
