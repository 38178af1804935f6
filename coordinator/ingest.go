package coordinator

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
)

// ingest stores the submissions of the submit stream: each is validated
// (against the task cache and the quotas), stored in batches, one
// statement each, or refused with its rejected event, and its message is
// acknowledged only after the commit. Batches are formed fairly (see
// start): a tenant's burst in the stream does not hold the others'
// submissions back, within the read-ahead window. When an executor waits
// idle in a long poll (see parking), the jobs it can run go straight to
// it in the statement that stores them. Its goroutine is the consumer's
// loop, which Start starts and Stop drains with the other consumers
// before the loops end. The request/reply API validates its submissions
// with it too (validate).
type ingest struct {
	cfg ingestConfig
	serviceBase
	// sources are where it reads the submissions, once started.
	sources atomic.Pointer[streamSources]
	dead    *deadLetters
	quotas  *quotas
	tasks   *taskCache // refuses the tasks no executor runs
	// parking holds the idle executors' dispatch requests (the
	// dispatcher's), and handedOver answers one with the jobs stored for
	// it (dispatcher.handedOver).
	parking    *parking
	handedOver func(ctx context.Context, r *parkedRequest, jobs []fairway.Job, start time.Time)
	// kickOutbox publishes the rejected events (relay.kick), called once
	// they are stored.
	kickOutbox func()

	// journal stores the submissions (Coordinator.onJournal sets it); its
	// leader resolves dependencies, keeps the due times and wakes the
	// executors.
	parts partitions
	// routes says whether this coordinator serves the dispatch requests
	// (Coordinator.routes): only it holds parked requests to hand over to.
	routes func() bool

	splits atomic.Int64 // batches split in halves to find a poison
	// rejectLog bounds the lines of rejected submissions (each has its
	// rejected event; the log only helps an operator see them).
	rejectLog *logLimit
}

// ingestConfig configures ingest.
type ingestConfig struct {
	// Batch caps the submissions stored in one transaction
	// (Config.IngestBatch). Defaults to IngestBatchDefault.
	Batch int
	// Window caps one group's submissions read ahead, unacknowledged:
	// the room a group has in the inbox (see streamSources). Defaults to
	// two batches, less for a group whose submission rate would keep them
	// there longer than rateHold.
	Window int
	// SweepEvery is how often the submit streams are swept for groups
	// whose announcements were missed (tests make it long, to see the
	// announcements work). Defaults to sourceSweepEvery.
	SweepEvery time.Duration
	// Rate is the submission rate of a group (Config.QuotaSubmitRate):
	// over it, a group's submissions are stored later. 0: unlimited.
	Rate float64
	// MaxArgsSize caps a job's args (Config.MaxArgsSize). Defaults to
	// fairway.DefaultMaxArgsSize.
	MaxArgsSize int64
	// Retries is the max_retries of jobs submitted without one
	// (Config.Retries).
	Retries int
}

// rateHold is how long, about, a group over its submission rate has its
// submissions wait in the inbox (ingestConfig.Window): the rest wait in
// NATS.
const rateHold = 2500 * time.Millisecond

func (c ingestConfig) withDefaults() ingestConfig {
	c.Batch = cmp.Or(c.Batch, IngestBatchDefault)
	if c.Window <= 0 {
		c.Window = 2 * c.Batch
		if c.Rate > 0 {
			c.Window = max(1, min(c.Window, int(c.Rate*rateHold.Seconds())))
		}
	}
	c.MaxArgsSize = cmp.Or(c.MaxArgsSize, fairway.DefaultMaxArgsSize)
	return c
}

func newIngest(cfg ingestConfig, b serviceBase, dead *deadLetters, q *quotas, tasks *taskCache, p *parking,
	handedOver func(context.Context, *parkedRequest, []fairway.Job, time.Time),
	kickOutbox func()) *ingest {
	return &ingest{cfg: cfg.withDefaults(), serviceBase: b,
		dead: dead, quotas: q, tasks: tasks, parking: p, handedOver: handedOver,
		kickOutbox: kickOutbox, rejectLog: newLogLimit(rejectLogPerSecond)}
}

// start reads the submit streams, each group's submissions on their own
// (streamSources), into a fair inbox, and stores them in batches: each
// batch takes from the groups round-robin, each group's submissions in
// their order, passing over a group over its submission rate (its
// submissions wait, in the inbox and then in NATS, and are stored later).
// A batch holds about Batch submissions, however many messages carry
// them. The fetches stop when cons drains; the loop ends with ctx.
func (in *ingest) start(ctx context.Context, subs *subscriptions, cons *consumers) error {
	weight := func(msg jetstream.Msg) int { return min(countSubmissions(msg.Data()), events.MaxSubmitBatch) }
	inbox := newFairInbox(in.cfg.Window, ingestGroupBytes, ingestWindowBytes, weight)
	if in.quotas.rate > 0 || in.quotas.byteRate > 0 {
		inbox.allow = func(group string, n, bytes int) (bool, time.Duration) {
			ok, wait := in.quotas.deferSubmits(group, n, bytes)
			if !ok {
				in.metrics.rateDeferred.Inc()
			}
			return ok, wait
		}
	}
	// A fetch must be able to carry the largest message.
	sources := newStreamSources(cons.js, cons.nc, submitLayout(in.subjects), in.log, inbox, max(pullMaxBytes/2, int(cons.nc.MaxPayload())))
	if in.cfg.SweepEvery > 0 {
		sources.sweepEvery = in.cfg.SweepEvery
	}
	in.sources.Store(sources)
	return sources.run(ctx, subs, cons, in.cfg.Batch, in.handle)
}

// rejectLogPerSecond is how many rejected submissions a coordinator logs a
// second, at most; the rest are counted in a line once the second is over.
const rejectLogPerSecond = 20

// The memory of ingest's read-ahead: one group's messages held at most
// (besides Window submissions), and all groups' together. Both keep the
// coordinator's memory bounded whatever the backlog in NATS.
const (
	ingestGroupBytes  = 16 << 20
	ingestWindowBytes = 64 << 20
)

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

// validate decodes and checks a submission for the group and task of its
// subject (task "" on the API, where the body names it). received is when
// the submission arrived. A body without an id gets defaultID's, when
// given, before anything else (a rejection names it too); else Normalize
// makes a new one. The request/reply API validates its submissions with
// it too.
func (in *ingest) validate(ctx context.Context, group, task string, data []byte, received time.Time, defaultID func() string) (fairway.Submission, error) {
	sub, err := fairway.DecodeSubmission(data, in.cfg.MaxArgsSize)
	if sub.ID == "" && defaultID != nil {
		sub.ID = defaultID()
	}
	if err != nil {
		return sub, err
	}
	if err := sub.Normalize(group, task, in.cfg.MaxArgsSize, in.cfg.Retries); err != nil {
		return sub, err
	}
	if err := in.tasks.check(ctx, sub.Task, received); err != nil {
		return sub, err
	}
	return sub, nil
}

// handle stores a batch of submission messages: each message holds one
// submission or an array of them, each validated, admitted and stored or
// refused on its own.
func (in *ingest) handle(ctx context.Context, msgs []jetstream.Msg) {
	received := time.Now() // every message of the batch arrived before
	items := make([]ingestItem, 0, len(msgs))
	defer func() { observe(in.metrics.ingestBatch, in.metrics.ingestTime, len(items), received) }()
	var valid []fairway.Submission
	var validAt []int
	for m, msg := range msgs {
		group, task, _ := in.subjects.ParseSubmit(msg.Subject())
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
			sub, err := in.validate(ctx, group, task, data, received, defaultID)
			if err == nil && k >= events.MaxSubmitBatch {
				err = fairway.Invalid("batch", "submission %d of a message of %d: a message carries at most %d submissions", k, len(parts), events.MaxSubmitBatch)
			}
			it.span = in.ingestSpan(ctx, msg.Headers(), &sub, group, task, received)
			if err != nil {
				r := rejection(sub, group, task, err)
				it.rej = &r
			} else {
				valid, validAt = append(valid, sub), append(validAt, len(items))
			}
			items = append(items, it)
		}
	}
	// retry marks the messages to be tried again: their partition's
	// database did not answer (admitting them counts its groups' jobs;
	// storing them appends to its journal). The other partitions' go on.
	retry := make([]bool, len(msgs))
	var err error
	if len(valid) > 0 {
		for _, idx := range in.parts.split(valid) {
			part := make([]fairway.Submission, len(idx))
			for k, i := range idx {
				part[k] = valid[i]
			}
			refusals, aerr := in.quotas.admit(ctx, part)
			if aerr != nil {
				if err == nil {
					err = aerr
				}
				for _, i := range idx {
					retry[items[validAt[i]].msg] = true
				}
				continue
			}
			for k, i := range idx {
				if refusals[k] != nil {
					r := rejection(valid[i], valid[i].Group, valid[i].Task, refusals[k])
					items[validAt[i]].rej = &r
				} else {
					items[validAt[i]].sub = &valid[i]
				}
			}
		}
	}
	if err != nil {
		// Only what could be admitted is stored.
		var kept, dropped []ingestItem
		for _, it := range items {
			if retry[it.msg] {
				dropped = append(dropped, it)
			} else {
				kept = append(kept, it)
			}
		}
		endIngestSpans(dropped, nil, err)
		items = kept
		if len(items) == 0 {
			in.retryMarked(ctx, msgs, retry, err)
			return
		}
	}
	handled := make([]bool, len(msgs)) // dead-lettered or handed back by storeSubmissions
	var hand *parkedRequest
	if in.routes() { // the leader hands over (journalEngine.insertFor)
		hand = in.idleExecutorFor(items)
	}
	added, handedOver, failed, serr := in.storeByPartition(ctx, msgs, items, handled, hand)
	if hand != nil {
		if len(handedOver) > 0 {
			in.handedOver(ctx, hand, handedOver, received)
		} else {
			for _, r := range in.parking.putBack([]*parkedRequest{hand}) {
				in.handedOver(ctx, r, nil, received) // answered empty: its instance parked a newer request
			}
		}
	}
	if serr != nil {
		if err == nil {
			err = serr
		}
		for m := range retry {
			retry[m] = retry[m] || failed[m]
		}
	}
	if err != nil && in.retryMarked(ctx, msgs, retry, err) == len(msgs) {
		return
	}
	chaosAfterIngestCommit(in.log, len(added)) // a no-op but in the fault suite's build, see chaoshook.go
	// Acknowledged once every submission of the message is stored (or
	// refused with its event): a redelivery before is a duplicate, and
	// changes nothing.
	for m, msg := range msgs {
		if handled[m] || retry[m] {
			continue
		}
		if err := msg.Ack(); err != nil {
			in.log.Debug("ack of a stored submission failed; a redelivery is a duplicate and changes nothing", "error", err)
		}
	}
}

// retryMarked leaves the messages retry marks in JetStream, to be tried
// again after an outage, and returns how many.
func (in *ingest) retryMarked(ctx context.Context, msgs []jetstream.Msg, retry []bool, err error) int {
	var again []jetstream.Msg
	for m, msg := range msgs {
		if retry[m] {
			again = append(again, msg)
		}
	}
	in.dead.retryLater(ctx, again, err)
	return len(again)
}

// storeByPartition is storeSubmissions for each partition's messages (a
// message is one group's, so in one partition), the partitions at once: a
// partition whose database is unavailable leaves its messages to be tried
// again (retry, by message; err is the first such error) while the
// others' are stored and acknowledged. Stored as one batch, a primary
// down held every partition's submissions back with its own. hand goes to
// the partition of the first submission it could run now.
func (in *ingest) storeByPartition(ctx context.Context, msgs []jetstream.Msg, items []ingestItem, handled []bool,
	hand *parkedRequest) (added []fairway.Submission, handed []fairway.Job, retry []bool, err error) {
	retry = make([]bool, len(msgs))
	if len(in.parts) == 1 {
		added, handed, err = in.storeSubmissions(ctx, msgs, items, handled, hand)
		if err != nil {
			for m := range retry {
				retry[m] = true
			}
		}
		return added, handed, retry, err
	}
	byPart := map[*journalEngine][]ingestItem{}
	var order []*journalEngine
	var handTo *journalEngine
	now := time.Now()
	for _, it := range items {
		group, _, _ := in.subjects.ParseSubmit(msgs[it.msg].Subject())
		e := in.parts.of(group)
		if _, ok := byPart[e]; !ok {
			order = append(order, e)
		}
		byPart[e] = append(byPart[e], it)
		if hand != nil && handTo == nil && it.sub != nil && handable(*it.sub, now) && slices.Contains(hand.req.Tasks, it.sub.Task) {
			handTo = e
		}
	}
	type stored struct {
		added  []fairway.Submission
		handed []fairway.Job
		err    error
	}
	results := make([]stored, len(order))
	_ = inParallel(len(order), func(k int) error {
		var h *parkedRequest
		if order[k] == handTo {
			h = hand
		}
		r := &results[k]
		r.added, r.handed, r.err = in.storeSubmissions(ctx, msgs, byPart[order[k]], handled, h)
		return nil // each partition's error is its own
	})
	for k, e := range order {
		r := results[k]
		added = append(added, r.added...)
		if e == handTo {
			handed = r.handed
		}
		if r.err != nil {
			if err == nil {
				err = r.err
			}
			for _, it := range byPart[e] {
				retry[it.msg] = true
			}
		}
	}
	return added, handed, retry, err
}

// idleExecutorFor takes a parked dispatch request that can run a job of
// the batch now, if one is idle for certain (see parking.takeIdle): its
// jobs are then handed to it by the journal's leader (see
// storeSubmissions), which declines while concurrency or rate limits
// exist (journal.ErrNoHandOver): a claim checks them.
func (in *ingest) idleExecutorFor(items []ingestItem) *parkedRequest {
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
	return in.parking.takeIdle(func(r *parkedRequest) bool {
		if r.req.Slots <= 0 {
			return false
		}
		if r.req.Groups != nil {
			return false // claimed for, not handed a batch's jobs (which may be of other groups)
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
func (in *ingest) storeSubmissions(ctx context.Context, msgs []jetstream.Msg, items []ingestItem, handled []bool,
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
	var res []store.Inserted
	var handedOver []fairway.Job
	var err error
	res, handedOver, err = in.parts.insertFor(ctx, subs, hand)
	for i, r := range res {
		// Refused at the insert (a dependency on a job never submitted):
		// rejected.
		if fe := fairway.AsError(r.Err); r.Err != nil && !errors.Is(r.Err, fairway.ErrDuplicate) {
			rejections = append(rejections, store.Rejection{JobID: r.ID, Group: subs[i].Group, Task: subs[i].Task, Err: fe})
		}
	}
	if err == nil && len(rejections) > 0 {
		// Their rejected events, through the outbox: the relay reads it
		// when kicked, so only a batch that stored some kicks it (every
		// batch did, and the relay's read of an empty outbox, a
		// transaction, came with every batch stored).
		if err = in.store.Reject(ctx, rejections); err == nil {
			in.kickOutbox()
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, fairway.ErrUnavailable) || ctx.Err() != nil:
		endIngestSpans(items, nil, err)
		return nil, nil, err
	case len(items) > 1:
		in.log.Warn("PostgreSQL refused a batch of submissions; splitting it to find the one it refuses", "error", err, "batch", len(items))
		in.splits.Add(1)
		in.metrics.ingestSplits.Inc()
		half := len(items) / 2
		added, _, err := in.storeSubmissions(ctx, msgs, items[:half], handled, nil)
		if err != nil {
			return added, nil, err
		}
		more, _, err := in.storeSubmissions(ctx, msgs, items[half:], handled, nil)
		return append(added, more...), nil, err
	default:
		endIngestSpans(items, nil, err)
		it := items[0]
		msg := msgs[it.msg]
		group, task, _ := in.subjects.ParseSubmit(msg.Subject())
		var sub fairway.Submission
		if it.sub != nil {
			sub = *it.sub
		} else {
			sub.ID = it.rej.JobID
		}
		// PostgreSQL's text stays in the log, under the id the event names.
		id := fairway.NewID()
		in.log.Error("PostgreSQL refused a submission", "request_id", id, "job_id", fairway.TruncateRunes(sub.ID, fairway.MaxIDLength),
			"group", group, "task", task, "error", err)
		refuse := func() {
			refused := &fairway.Error{Code: fairway.CodeInvalid, Field: "args", Message: "PostgreSQL refused the job (a value it cannot store); request id " + id, RequestID: id}
			if err := in.store.Reject(ctx, []store.Rejection{rejection(sub, group, task, refused)}); err != nil {
				in.log.Warn("recording the rejection of a refused submission", "error", err)
			}
			in.kickOutbox()
		}
		if it.part >= 0 {
			// The message's other submissions are stored: this one is
			// refused now rather than the whole message held back.
			refuse()
			return nil, nil, nil
		}
		handled[it.msg] = true
		in.dead.refused(ctx, events.DeadSubmit, msg, "PostgreSQL refused the submission; request id "+id, refuse)
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
			if in.rejectLog.allow(in.log, "submissions rejected") {
				in.log.Info("submission rejected", "job_id", r.ID, "group", subs[i].Group, "task", subs[i].Task, "error", r.Err)
			}
		}
	}
	for _, r := range rejections {
		if !in.rejectLog.allow(in.log, "submissions rejected") {
			continue
		}
		in.log.Info("submission rejected", "job_id", fairway.TruncateRunes(r.JobID, fairway.MaxIDLength), "group", fairway.TruncateRunes(r.Group, fairway.MaxNameLength),
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
	return sequenceID(meta.Stream, meta.Sequence.Stream, meta.Timestamp)
}

// sequenceID is the UUIDv7 of the message at sequence seq of stream, stored
// at t: t's milliseconds, then a hash of the stream and sequence.
func sequenceID(stream string, seq uint64, t time.Time) string {
	var u uuid.UUID
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", stream, seq))
	copy(u[6:], sum[:10])
	var ms [8]byte // the time in milliseconds, of which UUIDv7 takes the low 48 bits
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(u[:6], ms[2:])
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
