package coordinator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/store"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
)

// ackWait is how long a message handed to a coordinator waits for its ack
// before JetStream hands it to another (JetStream's default is 30 s).
const ackWait = 10 * time.Second

// startIngest consumes the submit stream: submissions are validated,
// stored in batches, and acknowledged only after the commit. Batches are
// formed fairly (see consume): a tenant's burst in the stream does not
// hold the others' submissions back, within the read-ahead window.
func (c *Coordinator) startIngest(ctx context.Context) error {
	groupOf := func(msg jetstream.Msg) string {
		group, _, _ := c.subjects.ParseSubmit(msg.Subject())
		return group
	}
	window := min(ingestWindow*c.cfg.IngestBatch, ingestWindowMax)
	// A batch holds about IngestBatch submissions, however many messages
	// carry them.
	weight := func(msg jetstream.Msg) int { return min(countSubmissions(msg.Data()), events.MaxSubmitBatch) }
	return c.consume(ctx, c.subjects.SubmitStream(), "ingest", c.cfg.IngestBatch, max(window, 2*c.cfg.IngestBatch), groupOf, weight, c.ingest)
}

// The read-ahead of ingest: how many batches' worth of submissions a
// coordinator holds unacknowledged at most, and how many bytes of them it
// queues. Bursts up to that size are ingested round-robin across groups;
// beyond it, a group's later submissions wait behind what is already in
// the stream. Both bounds keep the window well inside ackWait at ingest's
// slowest rates, and the coordinator's memory bounded whatever the
// backlog.
const (
	ingestWindow      = 32     // batches
	ingestWindowMax   = 20_000 // submissions, whatever the batch size
	ingestWindowBytes = 64 << 20
	pullMaxBytes      = 16 << 20 // a pull's bytes, at least (two max_payloads if larger)
)

// consume runs handle on batches of messages from a durable consumer shared
// by all coordinators, with at most window unacknowledged. A batch is
// whatever has arrived, up to size: the first message is waited for, the
// rest are taken as they are. With key set, messages are read ahead while
// batches are handled (up to window, and ingestWindowBytes) into a queue
// per key, and each batch takes from the keys round-robin (fairInbox);
// without it, batches keep the stream's order.
func (c *Coordinator) consume(ctx context.Context, stream, name string, size, window int, key func(jetstream.Msg) string,
	weight func(jetstream.Msg) int, handle func(context.Context, []jetstream.Msg)) error {
	cons, err := c.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:     name,
		Description: "Fairway coordinators",
		AckPolicy:   jetstream.AckExplicitPolicy,
		// A coordinator that dies holding messages leaves them to the
		// others after this long; a batch is stored well within it.
		AckWait:       ackWait,
		MaxAckPending: window,
	})
	if err != nil {
		return fmt.Errorf("creating consumer %s on stream %s: %w", name, stream, err)
	}
	// Pulls are bounded in bytes as well as messages, so that large
	// messages cannot make a pull buffer hold gigabytes.
	pull := jetstream.PullMaxMessagesWithBytesLimit(2*size, max(pullMaxBytes, 2*int(c.nc.MaxPayload())))
	if key != nil {
		in := newFairInbox(window, ingestWindowBytes, weight, ctx.Done())
		cc, err := cons.Consume(func(msg jetstream.Msg) { in.push(key(msg), msg) }, pull)
		if err != nil {
			return fmt.Errorf("consuming %s: %w", stream, err)
		}
		c.consumes = append(c.consumes, cc)
		c.goLoop(ctx, func(ctx context.Context) {
			defer in.nakAll()
			for {
				batch, ok := in.take(ctx, size)
				if !ok {
					return
				}
				handle(ctx, batch)
			}
		})
		return nil
	}
	msgs := make(chan jetstream.Msg, 2*size)
	cc, err := cons.Consume(func(msg jetstream.Msg) { msgs <- msg }, pull)
	if err != nil {
		return fmt.Errorf("consuming %s: %w", stream, err)
	}
	c.consumes = append(c.consumes, cc)
	c.goLoop(ctx, func(ctx context.Context) {
		batch := make([]jetstream.Msg, 0, size)
		for {
			select {
			case <-ctx.Done():
				return
			case msg := <-msgs:
				batch = append(batch[:0], msg)
			}
		fill:
			for len(batch) < size {
				select {
				case msg := <-msgs:
					batch = append(batch, msg)
				default:
					break fill
				}
			}
			handle(ctx, batch)
		}
	})
	return nil
}

// ingestItem is one submission of a batch (a message holds one, or an
// array of them): valid (sub) or rejected (rej).
type ingestItem struct {
	msg  int // index of its message in the batch
	part int // its place in the message's array; -1: the message is one submission
	sub  *fairway.Submission
	rej  *store.Rejection
	span trace.Span // SpanIngest, ended once the batch is stored
}

// countSubmissions counts the submissions of a submit message's body
// without decoding it: the elements of a JSON array, or one. A malformed
// body counts for what the scan finds (it only sizes batches).
func countSubmissions(data []byte) int {
	i := 0
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n') {
		i++
	}
	if i == len(data) || data[i] != '[' {
		return 1
	}
	n, depth, inString, escaped, empty := 1, 0, false, false, true
	for _, b := range data[i:] {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString, empty = true, false
		case b == '[' || b == '{':
			if depth > 0 {
				empty = false
			}
			depth++
		case b == ']' || b == '}':
			depth--
		case b == ',' && depth == 1:
			n++
		case b != ' ' && b != '\t' && b != '\r' && b != '\n':
			empty = false
		}
	}
	if empty {
		return 1
	}
	return n
}

// submitParts splits a submit message's body: a JSON array of submissions
// (events.Client.SubmitMany sends those), or one submission (batch false).
// A body that starts as an array but is not one is taken as one
// submission, and refused as such, naming what is wrong.
func submitParts(data []byte) (parts []json.RawMessage, batch bool) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return []json.RawMessage{data}, false
	}
	if err := json.Unmarshal(trimmed, &parts); err != nil || len(parts) == 0 {
		// Refused as a body of one submission, naming what is wrong.
		return []json.RawMessage{data}, false
	}
	return parts, true
}

func (c *Coordinator) ingest(ctx context.Context, msgs []jetstream.Msg) {
	received := time.Now() // every message of the batch arrived before
	items := make([]ingestItem, 0, len(msgs))
	defer func() { observe(c.metrics.ingestBatch, c.metrics.ingestTime, len(items), received) }()
	var valid []fairway.Submission
	var validAt []int
	for m, msg := range msgs {
		group, task, _ := c.subjects.ParseSubmit(msg.Subject())
		parts, batch := submitParts(msg.Data())
		for k, data := range parts {
			it := ingestItem{msg: m, part: -1}
			// A body without an id gets the same one on every redelivery: the
			// store then keeps one job, whatever the redeliveries.
			defaultID := func() string { return messageID(msg) }
			if batch {
				it.part = k
				defaultID = func() string { return messageID(msg) + "." + strconv.Itoa(k) }
			}
			sub, err := c.validate(ctx, group, task, data, received, defaultID)
			if err == nil && k >= events.MaxSubmitBatch {
				err = fairway.Invalid("batch", "submission %d of a message of %d: a message carries at most %d submissions", k, len(parts), events.MaxSubmitBatch)
			}
			it.span = c.ingestSpan(ctx, msg.Headers(), &sub, group, task, received)
			if err != nil {
				r := rejection(sub, group, task, err)
				it.rej = &r
			} else {
				valid, validAt = append(valid, sub), append(validAt, len(items))
			}
			items = append(items, it)
		}
	}
	if len(valid) > 0 {
		refusals, err := c.admit(ctx, valid)
		if err != nil {
			endIngestSpans(items, nil, err)
			c.dead.retryLater(ctx, msgs, err)
			return
		}
		for k, i := range validAt {
			if refusals[k] != nil {
				r := rejection(valid[k], valid[k].Group, valid[k].Task, refusals[k])
				items[i].rej = &r
			} else {
				items[i].sub = &valid[k]
			}
		}
	}
	handled := make([]bool, len(msgs)) // dead-lettered or handed back by storeSubmissions
	hand := c.idleExecutorFor(items)
	added, handedOver, err := c.storeSubmissions(ctx, msgs, items, handled, hand)
	if hand != nil {
		if len(handedOver) > 0 {
			c.handedOver(ctx, hand, handedOver, received)
		} else {
			c.parking.putBack([]*parkedRequest{hand})
		}
	}
	if err != nil {
		c.dead.retryLater(ctx, msgs, err)
		return
	}
	chaosAfterIngestCommit(c.log, len(added)) // test-only, see chaoshook.go
	// Acknowledged once every submission of the message is stored (or
	// refused with its event): a redelivery before is a duplicate, and
	// changes nothing.
	for m, msg := range msgs {
		if handled[m] {
			continue
		}
		if err := msg.Ack(); err != nil {
			c.log.Debug("ack of a stored submission failed; a redelivery is a duplicate and changes nothing", "error", err)
		}
	}
	c.relay.kick()
	// The dependencies of the jobs stored with some may have ended
	// already (the API's submit and workflow resolve theirs at once).
	c.deps.queueStored(added)
	if len(handedOver) > 0 {
		// Those are taken: wake executors only for the others.
		taken := make(map[fairway.JobRef]bool, len(handedOver))
		for _, j := range handedOver {
			taken[j.Ref()] = true
		}
		rest := added[:0:0]
		for _, s := range added {
			if !taken[fairway.JobRef{Group: s.Group, ID: s.ID}] {
				rest = append(rest, s)
			}
		}
		added = rest
	}
	c.jobsAdded(added...)
}

// idleExecutorFor takes a parked dispatch request that can run a job of
// the batch now, if one is idle for certain (see parking.takeIdle): its
// jobs are then stored scheduled for it (see storeSubmissions). Not while
// concurrency limits exist: a claim checks them.
func (c *Coordinator) idleExecutorFor(items []ingestItem) *parkedRequest {
	if c.store.LimitsInUse() {
		return nil
	}
	now := time.Now()
	tasks := map[string]bool{}
	for _, it := range items {
		if it.sub != nil && handable(*it.sub, now) {
			tasks[it.sub.Task] = true
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	return c.parking.takeIdle(func(r *parkedRequest) bool {
		if r.req.Slots <= 0 {
			return false
		}
		for _, t := range r.req.Tasks {
			if tasks[t] {
				return true
			}
		}
		return false
	})
}

// handable says whether a submission may go straight to an idle executor:
// eligible at once (not held, no dependencies, not due later).
func handable(s fairway.Submission, now time.Time) bool {
	return !s.Held() && len(s.DependsOn) == 0 && (s.RunAt == nil || !s.RunAt.After(now))
}

// assignment picks, in batch order (round-robin across groups already),
// the submissions of subs that r's executor runs, up to its free slots and
// its tasks' own free slots.
func assignment(r *parkedRequest, subs []fairway.Submission, lease time.Duration) *store.Assignment {
	now := time.Now()
	runs := make(map[string]bool, len(r.req.Tasks))
	for _, t := range r.req.Tasks {
		runs[t] = true
	}
	a := &store.Assignment{Worker: r.req.Executor, Instance: r.req.Instance, ClaimID: r.req.RequestID, Lease: lease}
	perTask := map[string]int{}
	for i, s := range subs {
		if len(a.Jobs) == r.req.Slots {
			break
		}
		if !runs[s.Task] || !handable(s, now) {
			continue
		}
		if limit, capped := r.req.TaskSlots[s.Task]; capped && perTask[s.Task] >= limit {
			continue
		}
		perTask[s.Task]++
		a.Jobs = append(a.Jobs, i)
	}
	return a
}

// handedOver answers a parked dispatch request with the jobs stored for
// it, as a claim would have.
func (c *Coordinator) handedOver(ctx context.Context, r *parkedRequest, jobs []fairway.Job, start time.Time) {
	c.metrics.handedOver.Add(float64(len(jobs)))
	c.traceClaim(ctx, jobs, r.req.Executor, start)
	c.respondDispatch(r.msg, events.DispatchReply{Jobs: jobs})
}

// storeSubmissions stores a batch in one statement and returns the jobs it
// created, and those it handed to hand's executor (see
// store.InsertJobsFor; hand may be nil). A batch PostgreSQL refuses costs one more, checked, statement
// in the store, which stores all but the args it cannot store; should that
// be refused too (for a reason it does not check), the batch is split in
// halves, so that a poison costs a number of statements logarithmic in the
// batch, never one per row. A message of one submission that PostgreSQL
// refuses on its own is dead-lettered after DeadLetterAfter deliveries
// (marked in handled); a submission of a message of several is refused at
// once, with its rejected event, and the others stored. An error means
// PostgreSQL is unavailable (or the coordinator stops): nothing was
// stored, the messages are to be tried again.
func (c *Coordinator) storeSubmissions(ctx context.Context, msgs []jetstream.Msg, items []ingestItem, handled []bool,
	hand *parkedRequest) ([]fairway.Submission, []fairway.Job, error) {
	var subs []fairway.Submission
	var rejections []store.Rejection
	for _, it := range items {
		if it.sub != nil {
			subs = append(subs, *it.sub)
		} else {
			rejections = append(rejections, *it.rej)
		}
	}
	var a *store.Assignment
	if hand != nil {
		a = assignment(hand, subs, c.cfg.Lease)
	}
	res, handedOver, err := c.store.InsertJobsFor(ctx, subs, rejections, a)
	switch {
	case err == nil:
	case errors.Is(err, fairway.ErrUnavailable) || ctx.Err() != nil:
		endIngestSpans(items, nil, err)
		return nil, nil, err
	case len(items) > 1:
		c.log.Warn("PostgreSQL refused a batch of submissions; splitting it to find the one it refuses", "error", err, "batch", len(items))
		c.splits.Add(1)
		half := len(items) / 2
		added, _, err := c.storeSubmissions(ctx, msgs, items[:half], handled, nil)
		if err != nil {
			return added, nil, err
		}
		more, _, err := c.storeSubmissions(ctx, msgs, items[half:], handled, nil)
		return append(added, more...), nil, err
	default:
		endIngestSpans(items, nil, err)
		it := items[0]
		msg := msgs[it.msg]
		group, task, _ := c.subjects.ParseSubmit(msg.Subject())
		var sub fairway.Submission
		if it.sub != nil {
			sub = *it.sub
		} else {
			sub.ID = it.rej.JobID
		}
		// PostgreSQL's text stays in the log, under the id the event names.
		id := fairway.NewID()
		c.log.Error("PostgreSQL refused a submission", "request_id", id, "job_id", fairway.TruncateRunes(sub.ID, fairway.MaxIDLength),
			"group", group, "task", task, "error", err)
		refuse := func() {
			refused := &fairway.Error{Code: fairway.CodeInvalid, Field: "args", Message: "PostgreSQL refused the job (a value it cannot store); request id " + id, RequestID: id}
			if _, err := c.store.InsertJobs(ctx, nil, []store.Rejection{rejection(sub, group, task, refused)}); err != nil {
				c.log.Warn("recording the rejection of a refused submission", "error", err)
			}
			c.relay.kick()
		}
		if it.part >= 0 {
			// The message's other submissions are stored: this one is
			// refused now rather than the whole message held back.
			refuse()
			return nil, nil, nil
		}
		handled[it.msg] = true
		c.dead.refused(ctx, events.DeadSubmit, msg, "PostgreSQL refused the submission; request id "+id, refuse)
		return nil, nil, nil
	}
	// The spans end before the acks and the wake-up: a job can run, and
	// end, only after its ingest span has.
	endIngestSpans(items, res, nil)
	var added []fairway.Submission
	for i, r := range res {
		if r.Created {
			added = append(added, subs[i])
		} else if r.Err != nil && !errors.Is(r.Err, fairway.ErrDuplicate) {
			c.log.Info("submission rejected", "job_id", r.ID, "group", subs[i].Group, "task", subs[i].Task, "error", r.Err)
		}
	}
	for _, r := range rejections {
		c.log.Info("submission rejected", "job_id", fairway.TruncateRunes(r.JobID, fairway.MaxIDLength), "group", fairway.TruncateRunes(r.Group, fairway.MaxNameLength),
			"task", fairway.TruncateRunes(r.Task, fairway.MaxNameLength), "error", fairway.TruncateBytes(r.Err.Error(), fairway.MaxErrorTextSize))
	}
	return added, handedOver, nil
}

// messageID gives a submission without an id one that is the same on every
// redelivery: the Nats-Msg-Id header if it is a valid id, else a UUIDv7
// made from the message's stream time and sequence. Like every job id it
// is unique within the submission's group only: the same Nats-Msg-Id in
// two groups makes two jobs.
func messageID(msg jetstream.Msg) string {
	if id := msg.Headers().Get(jetstream.MsgIDHeader); id != "" {
		s := fairway.Submission{ID: id}
		if s.Normalize("g", "t", 1, 0) == nil {
			return id
		}
	}
	meta, err := msg.Metadata()
	if err != nil {
		return fairway.NewID()
	}
	var u uuid.UUID
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", meta.Stream, meta.Sequence.Stream))
	copy(u[6:], sum[:10])
	ms := uint64(meta.Timestamp.UnixMilli())
	for i := range 6 {
		u[i] = byte(ms >> (8 * (5 - i)))
	}
	u[6] = u[6]&0x0f | 0x70 // version 7
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}

// endIngestSpans ends the ingest spans of a batch: with err when the
// batch was not stored, else with each submission's rejection or refusal
// (res, in the order of the batch's valid submissions), if any.
func endIngestSpans(items []ingestItem, res []store.Inserted, err error) {
	k := 0
	for _, it := range items {
		itemErr := err
		switch {
		case err != nil:
		case it.rej != nil:
			itemErr = it.rej.Err
		case it.sub != nil:
			if k < len(res) && res[k].Err != nil {
				itemErr = res[k].Err
			}
			k++
		}
		endSpan(it.span, itemErr)
	}
}
