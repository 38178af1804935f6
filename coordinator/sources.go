package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streamSources reads each key's messages on its own (a group's
// submissions, an executor's reports), so that one key's backlog in NATS,
// however large, delays no other key's:
//
//   - Messages wait in a shared stream (no authentication, and the
//     coordinators' own account), or in a key's own stream (operator
//     mode: a tenant's submit stream, events.EnsureTenantSubmitStream; an
//     executor's results stream, events.EnsureExecutorResultStream). Each
//     key has a durable consumer of its own on each stream that holds some
//     of its messages (a filtered one on the shared stream, the whole
//     stream on its own), made when the key first shows up and removed by
//     JetStream after an hour without a pull. The streamLayout names them.
//   - The streams announce each message they store, headers only
//     (events.Subjects.Stored, Reported): a key with nothing waiting costs
//     nothing, no pull and no timer. A coordinator that missed
//     announcements (it started, or its connection dropped) finds the keys
//     with messages waiting in a sweep of the streams' state, at start and
//     every sourceSweepEvery.
//   - A few fetchers take the keys with messages announced, in turn (those
//     with nothing in the inbox first), and fetch from each what its place
//     in the fair inbox holds (a key whose queue there is full waits for
//     the loop that applies the inbox to take from it, its messages
//     waiting in NATS meanwhile), at most fetchBytes a fetch, without
//     waiting for more (pullNoWait). A fetch that finds nothing, with no
//     announcement since it began, makes the key idle until its next
//     announcement.
//
// Memory is bounded by the inbox's per-key and total bounds plus one
// fetch per fetcher, whatever waits in NATS; JetStream keeps the rest,
// within each stream's limits.
type streamSources struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	layout streamLayout
	log    *slog.Logger
	inbox  *fairInbox
	// consumerConfig is the configuration of every group's consumer, but
	// its name and filter.
	consumerConfig jetstream.ConsumerConfig
	fetchBytes     int
	fetchers       int
	sweepEvery     time.Duration
	// sweepNow asks the sweep's loop for a sweep now (sweepAfter).
	sweepNow chan struct{}
	// sweeps are the sweeps asked for (sweepAfter), when due, soonest
	// first, and their one timer.
	sweeps struct {
		sync.Mutex
		due   []time.Time
		timer *time.Timer
	}
	// keepAliveEvery is how often keepAlive runs (the const's, but in a
	// test whose consumers' ack wait is shorter).
	keepAliveEvery time.Duration
	// handling are the messages handed to handle, since when (keepAlive).
	handling struct {
		sync.Mutex
		msgs  []jetstream.Msg
		since time.Time
	}
	// gate, when set, says whether to fetch at all (the journal engine's
	// reports: only its leader can apply them); reopen wakes the fetchers
	// when it opens.
	gate func() bool

	mu      sync.Mutex
	cond    *sync.Cond // ready gained a source, or stopping
	sources map[sourceKey]*source
	byGroup map[string][]*source
	// ready are the sources announced, not being fetched, with room in
	// the inbox, in turn; fresh those of them whose group has nothing in
	// the inbox, which go first: a group with nothing to store waits for
	// no group that has.
	ready    []*source
	fresh    []*source
	stopping bool
	wg       sync.WaitGroup
}

// streamLayout names the streams one kind of message waits in.
type streamLayout struct {
	// what names the messages ("submissions"), keyName their key
	// ("group"), as logs say them; keyName is also the kind of name
	// fairway.CheckName checks.
	what, keyName string
	// shared is the shared stream; sharedKey the key of a subject of its
	// (false: not one of a key's), sharedFilter the subjects of a key's
	// messages in it, sharedConsumer the prefix of its consumers' names,
	// which end in the key. legacyConsumer is the shared stream's single
	// consumer of earlier versions, removed at start ("": none).
	shared         string
	sharedKey      func(subject string) (string, bool)
	sharedFilter   func(key string) string
	sharedConsumer string
	legacyConsumer string
	// own is the name of a key's own stream, ownAll a subject that every
	// own stream captures a part of (to list them), ownConsumer the name
	// of the consumer on one.
	own         func(key string) string
	ownAll      string
	ownConsumer string
	// announced matches every announcement; parseAnnounced is the key of
	// one.
	announced      string
	parseAnnounced func(subject string) (string, bool)
}

// submitLayout is where submissions wait: the shared submit stream and
// each tenant's own.
func submitLayout(s events.Subjects) streamLayout {
	return streamLayout{
		what: "submissions", keyName: "group",
		shared: s.SubmitStream(),
		sharedKey: func(subject string) (string, bool) {
			rest, ok := strings.CutPrefix(subject, s.Prefix+".submit.")
			group, _, _ := strings.Cut(rest, ".")
			return group, ok && group != ""
		},
		sharedFilter: s.SubmitGroup, sharedConsumer: "ingest", legacyConsumer: "ingest",
		own: s.TenantSubmitStream, ownAll: s.TenantSubmitAll(), ownConsumer: "ingest",
		announced: s.StoredAll(), parseAnnounced: s.ParseStored,
	}
}

// resultLayout is where executors' reports wait: the shared results
// stream and each executor's own (operator mode).
func resultLayout(s events.Subjects) streamLayout {
	return streamLayout{
		what: "reports", keyName: "app-id",
		shared: s.ResultStream(),
		sharedKey: func(subject string) (string, bool) {
			rest, ok := strings.CutPrefix(subject, s.Prefix+".results.")
			return rest, ok && rest != ""
		},
		sharedFilter: s.Results, sharedConsumer: "results", legacyConsumer: "results",
		own: s.ExecutorResultStream, ownAll: s.ExecutorResultsAll(), ownConsumer: "results",
		announced: s.ReportedAll(), parseAnnounced: s.ParseReported,
	}
}

// sourceKey is a key's messages in one stream.
type sourceKey struct{ stream, group string }

type source struct {
	key    sourceKey
	name   string // its durable consumer's name
	filter string // its consumer's filter; "": the whole stream
	cons   jetstream.Consumer
	// announced counts announcements (and sweeps) that found it with
	// messages: a fetch that found nothing ends the source's turn only
	// if none came while it ran.
	announced uint64
	// storedSeq is the highest stream sequence announced, fetchedSeq the
	// highest this coordinator fetched: JetStream tells a stream's
	// consumers of a stored message after it announces it, so a fetch
	// right after an announcement may find nothing yet. A fetch while
	// storedSeq is ahead waits for the first message, briefly
	// (sourceSignalWait).
	storedSeq, fetchedSeq uint64
	queued                bool // in ready
	fetching              bool
	full                  bool // waiting for room in the inbox
	// weight is the submissions a message of the source carries, as last
	// seen: a fetch asks for what the inbox has room for.
	weight int
	// used is when it was last announced; failures counts the fetches
	// that failed in a row (each waits longer before the next).
	used     time.Time
	failures int
	// againAt is when the last of its messages handed back to JetStream
	// with a delay (retryAfterOutage) is handed out again, and again the
	// timer that rings the source then (nil: none pending).
	againAt time.Time
	again   *time.Timer
}

const (
	// sourceFetchers fetch from the groups with submissions, in turn: a
	// fetch takes a round trip, and a group's first one makes its
	// consumer.
	sourceFetchers = 8
	// sourceSweepEvery is how often the streams' state is read to find
	// groups with submissions whose announcement this coordinator missed
	// (and messages a dead coordinator held, handed out again after
	// ackWait).
	sourceSweepEvery = 10 * time.Second
	// sourceSignalWait is how long a fetch that follows an announcement
	// of a message it has not fetched waits for a first message (see
	// source.storedSeq). A fetch returns as soon as it has messages.
	sourceSignalWait = 50 * time.Millisecond
	// sourceInactive is how long a group's consumer lives without a pull.
	sourceInactive = time.Hour
	// sourceMaxAckPending bounds a group's submissions handed to the
	// coordinators and not yet stored.
	sourceMaxAckPending = 20_000
)

// newStreamSources reads the messages of layout into inbox; fetchBytes
// bounds a fetch (at least the largest message the streams hold).
func newStreamSources(js jetstream.JetStream, nc *nats.Conn, layout streamLayout, log *slog.Logger, inbox *fairInbox, fetchBytes int) *streamSources {
	s := &streamSources{
		js: js, nc: nc, layout: layout, log: log, inbox: inbox,
		consumerConfig: jetstream.ConsumerConfig{
			Description: "Fairway coordinators: one " + layout.keyName + "'s " + layout.what,
			AckPolicy:   jetstream.AckExplicitPolicy,
			// A coordinator that dies holding messages leaves them to the
			// others after this long; a batch is stored well within it.
			AckWait:           ackWait,
			MaxAckPending:     sourceMaxAckPending,
			InactiveThreshold: sourceInactive,
			// Its state need not survive a server's restart: on a
			// work-queue stream an acknowledged message is gone from the
			// stream itself, and one in flight is handed out again.
			MemoryStorage: true,
		},
		fetchBytes:     fetchBytes,
		fetchers:       sourceFetchers,
		sweepEvery:     sourceSweepEvery,
		sweepNow:       make(chan struct{}, 1),
		keepAliveEvery: keepAliveEvery,
		sources:        map[sourceKey]*source{},
		byGroup:        map[string][]*source{},
	}
	s.cond = sync.NewCond(&s.mu)
	inbox.room = s.roomFor
	return s
}

// start listens to the announcements, removes the shared stream's
// consumer of earlier versions (JetStream refuses a key's filtered
// consumer beside an unfiltered one on a work-queue stream), and starts the
// fetchers and the sweeps (the first at once).
func (s *streamSources) start(ctx context.Context, subs *subscriptions, goLoop func(context.Context, func(context.Context))) error {
	if err := subs.listen(s.layout.announced, s.announced); err != nil {
		return err
	}
	if s.layout.legacyConsumer != "" {
		if err := s.js.DeleteConsumer(ctx, s.layout.shared, s.layout.legacyConsumer); err == nil {
			s.log.Info("removed a stream's single consumer of an earlier version: each "+s.layout.keyName+" has its own now", "stream", s.layout.shared)
		} else if !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
			s.log.Warn("removing a stream's consumer of an earlier version", "stream", s.layout.shared, "error", err)
		}
	}
	pullers := make([]*puller, s.fetchers)
	for i := range pullers {
		p, err := newPuller(s.nc)
		if err != nil {
			for _, p := range pullers[:i] {
				p.close()
			}
			return err
		}
		pullers[i] = p
	}
	for _, p := range pullers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer p.close()
			s.fetchLoop(ctx, p)
		}()
	}
	// The first sweep runs on the loop too: a start does not wait for the
	// streams' state (thousands of tenant streams are a long listing), and
	// the announcements are heard meanwhile. A second comes when what a
	// coordinator that died (this one's earlier run, say) was handed is
	// handed out again.
	s.sweepAfter(afterTakeOver)
	goLoop(ctx, func(ctx context.Context) {
		t := time.NewTicker(s.keepAliveEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				s.keepAlive(now.Add(-s.keepAliveEvery))
			}
		}
	})
	goLoop(ctx, func(ctx context.Context) {
		t := time.NewTicker(s.sweepEvery)
		defer t.Stop()
		for {
			s.sweep(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.forgetIdle()
			case <-s.sweepNow:
			}
		}
	})
	return nil
}

// sweepAfter has the streams swept once more, d from now: a coordinator
// that comes to lead, its predecessor maybe dead, sweeps when what that
// one was handed (submissions, reports) is handed out again, after
// ackWait. A sweep every sourceSweepEvery alone found them up to 10 s
// later: the reports of jobs run under a leader SIGKILLed were applied
// 14–18 s after (the ack wait then 10 s), in the fault suite's
// partition-kill-leader. Sweeps asked for within sweepsCoalesce of one
// another are one, at the later time (a coordinator that starts and
// comes to lead at once asks twice for the same moment; a sweep lists
// every tenant's stream).
func (s *streamSources) sweepAfter(d time.Duration) {
	at := time.Now().Add(d)
	sw := &s.sweeps
	sw.Lock()
	defer sw.Unlock()
	k := slices.IndexFunc(sw.due, func(due time.Time) bool { return at.Sub(due).Abs() <= sweepsCoalesce })
	if k >= 0 {
		sw.due[k] = later(sw.due[k], at)
	} else {
		sw.due = append(sw.due, at)
	}
	slices.SortFunc(sw.due, time.Time.Compare)
	if sw.timer == nil {
		sw.timer = time.AfterFunc(time.Until(sw.due[0]), s.sweepDue)
	} else {
		sw.timer.Reset(time.Until(sw.due[0]))
	}
}

// sweepsCoalesce is how close two sweeps asked for are made one.
const sweepsCoalesce = time.Second

// sweepDue asks the sweep's loop for the sweeps due (sweepAfter's timer),
// and sets the timer for the next.
func (s *streamSources) sweepDue() {
	sw := &s.sweeps
	sw.Lock()
	now := time.Now()
	n := 0
	for n < len(sw.due) && !sw.due[n].After(now) {
		n++
	}
	sw.due = sw.due[n:]
	if len(sw.due) > 0 {
		sw.timer.Reset(time.Until(sw.due[0]))
	}
	sw.Unlock()
	if n > 0 {
		select {
		case s.sweepNow <- struct{}{}:
		default: // one is asked already
		}
	}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// afterTakeOver is how long after it comes to lead a coordinator sweeps
// the streams (sweepAfter): what its predecessor was handed is handed
// out again after ackWait, from its delivery.
const afterTakeOver = ackWait + 500*time.Millisecond

// run starts the sources (start) and a loop of cons that hands handle
// batches of up to batch weight taken from the inbox round-robin, until
// ctx ends; then the inbox's messages go back to JetStream. The fetches
// stop when cons drains.
func (s *streamSources) run(ctx context.Context, subs *subscriptions, cons *consumers, batch int,
	handle func(context.Context, []jetstream.Msg)) error {
	if err := s.start(ctx, subs, cons.goLoop); err != nil {
		return err
	}
	cons.stoppers = append(cons.stoppers, s.stop)
	cons.goLoop(ctx, func(ctx context.Context) {
		defer s.inbox.nakAll()
		for {
			msgs, ok := s.inbox.take(ctx, batch)
			if !ok {
				return
			}
			s.handling.Lock()
			s.handling.msgs, s.handling.since = msgs, time.Now()
			s.handling.Unlock()
			handle(ctx, msgs)
			s.handling.Lock()
			s.handling.msgs = nil
			s.handling.Unlock()
		}
	})
	return nil
}

// keepAliveEvery is how often a coordinator tells JetStream that it still
// works on the messages it has held longer than that (keepAlive): a third
// of ackWait.
const keepAliveEvery = ackWait / 3

// keepAliveFor is how long a coordinator keeps a message it holds alive
// at most (keepAlive): a batch waits on a database call for at most its
// bound (journal.LeaderConfig.CallTimeout, 10 s) a call, so one held
// longer is in a coordinator that no longer works on it, whatever it
// says, and goes to another after the ack wait.
const keepAliveFor = time.Minute

// keepAlive tells JetStream that this coordinator still works on the
// messages it holds since before t (for at most keepAliveFor), in its
// inbox or in handle (a batch waiting on a slow database): JetStream then
// waits ackWait more before it hands them to another. Messages are held
// for milliseconds when all is well, so this costs nothing then.
func (s *streamSources) keepAlive(t time.Time) {
	since := time.Now().Add(-keepAliveFor)
	msgs := s.inbox.older(t, since)
	s.handling.Lock()
	if s.handling.since.Before(t) && !s.handling.since.Before(since) {
		msgs = append(msgs, s.handling.msgs...)
	}
	s.handling.Unlock()
	for _, msg := range msgs {
		_ = msg.InProgress() // one lost: JetStream hands it out again, a duplicate the store finds
	}
}

// reopen wakes the fetchers that wait for the gate (streamSources.gate).
func (s *streamSources) reopen() {
	s.mu.Lock()
	s.cond.Broadcast()
	s.mu.Unlock()
}

// stop ends the fetches: the fetchers finish the fetch in hand (its
// messages go to the inbox) and return.
func (s *streamSources) stop() {
	s.mu.Lock()
	s.stopping = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
}

// announced handles a stream's announcement of a stored message.
func (s *streamSources) announced(msg *nats.Msg) {
	group, ok := s.layout.parseAnnounced(msg.Subject)
	if !ok {
		return
	}
	stream := msg.Header.Get(jetstream.StreamHeader)
	// Only the layout's streams announce: a name that is not one of theirs
	// (a client publishing there by hand) is ignored.
	if stream != s.layout.shared && stream != s.layout.own(group) {
		return
	}
	seq, _ := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)

	s.ringSeq(sourceKey{stream: stream, group: group}, seq)
}

// ring says that key has messages waiting: it takes its turn to be
// fetched, unless it is being fetched or waits for room.
func (s *streamSources) ring(key sourceKey) { s.ringSeq(key, 0) }

// ringSeq is ring for the announcement of the message of stream sequence
// seq (0: a sweep, which knows none).
func (s *streamSources) ringSeq(key sourceKey, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.sources[key]
	if src == nil {
		src = s.newSource(key)
		s.sources[key] = src
		s.byGroup[key.group] = append(s.byGroup[key.group], src)
	}
	src.announced++
	src.storedSeq = max(src.storedSeq, seq)
	src.used = time.Now()
	s.enqueueLocked(src)
}

// forgetIdle forgets the sources not announced for sourceInactive (their
// consumers are gone by then too): groups come and go, and this
// coordinator's memory does not grow with every group that ever was.
func (s *streamSources) forgetIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, src := range s.sources {
		if src.queued || src.fetching || src.full || src.again != nil || time.Since(src.used) < sourceInactive {
			continue
		}
		delete(s.sources, key)
		rest := slices.DeleteFunc(s.byGroup[key.group], func(o *source) bool { return o == src })
		if len(rest) == 0 {
			delete(s.byGroup, key.group)
		} else {
			s.byGroup[key.group] = rest
		}
	}
}

func (s *streamSources) enqueueLocked(src *source) {
	if src.queued || src.fetching || src.full || s.stopping {
		return
	}
	src.queued = true
	if s.inbox.queued(src.key.group) == 0 {
		s.fresh = append(s.fresh, src)
	} else {
		s.ready = append(s.ready, src)
	}
	s.cond.Signal()
}

// newSource names a key's consumer on a stream: on the shared stream
// "<sharedConsumer>-<key>" ("ingest-acme") filtered to the key's subjects
// (a key that is not a valid name, which only a malformed subject carries,
// by its hash: its messages are refused, submissions with their rejected
// events, reports to the dead letters); on a key's own stream ownConsumer,
// the whole stream.
func (s *streamSources) newSource(key sourceKey) *source {
	src := &source{key: key, name: s.layout.ownConsumer, weight: 1}
	if key.stream == s.layout.shared {
		token := key.group
		if fairway.CheckName(s.layout.keyName, token) != nil {
			sum := sha256.Sum256([]byte(token))
			token = "x" + hex.EncodeToString(sum[:8])
		}
		src.name = s.layout.sharedConsumer + "-" + token
		// One filter: JetStream counts a single filter's pending messages
		// from its subject tree, several ones by a scan.
		src.filter = s.layout.sharedFilter(key.group)
	}
	return src
}

// roomFor is called by the inbox when a group's queue has room again.
func (s *streamSources) roomFor(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, src := range s.byGroup[group] {
		if src.full {
			src.full = false
			s.enqueueLocked(src)
		}
	}
}

// fetchLoop fetches from the sources in turn until stop.
func (s *streamSources) fetchLoop(ctx context.Context, p *puller) {
	for {
		s.mu.Lock()
		for (len(s.ready)+len(s.fresh) == 0 || (s.gate != nil && !s.gate())) && !s.stopping {
			s.cond.Wait()
		}
		if s.stopping {
			s.mu.Unlock()
			return
		}
		queue := &s.fresh
		if len(s.fresh) == 0 {
			queue = &s.ready
		}
		src := (*queue)[0]
		(*queue)[0] = nil
		*queue = (*queue)[1:]
		src.queued = false
		room, ok := s.inbox.roomFor(src.key.group)
		if !ok {
			src.full = true
			s.mu.Unlock()
			// Room may have come between the check and the mark.
			if _, ok := s.inbox.roomFor(src.key.group); ok {
				s.roomFor(src.key.group)
			}
			continue
		}
		src.fetching = true
		seen := src.announced
		batch := max(1, room/max(src.weight, 1))
		var wait time.Duration
		if src.storedSeq > src.fetchedSeq {
			wait = sourceSignalWait
		}
		s.mu.Unlock()

		got, drained, err := s.fetch(ctx, p, src, batch, wait)

		s.mu.Lock()
		src.fetching = false
		switch {
		case errors.Is(err, errConsumerGone):
			s.log.Debug("a consumer is gone (unused for an hour); making it again", s.layout.keyName, src.key.group, "stream", src.key.stream)
			s.enqueueLocked(src)
		case err != nil:
			if ctx.Err() == nil {
				// Once a second, doubling up to a minute: a key whose
				// consumer JetStream refuses (its limits) neither spins
				// nor floods the log.
				src.failures++
				wait := min(time.Second<<min(src.failures-1, 6), time.Minute)
				if src.failures == 1 || wait == time.Minute {
					s.log.Warn("fetching "+s.layout.what+" failed; they stay in NATS and are fetched again", s.layout.keyName, src.key.group,
						"stream", src.key.stream, "error", err, "failures", src.failures, "retry_in", wait.String())
				}
				key := src.key
				time.AfterFunc(wait, func() { s.ring(key) })
			}
		default:
			if src.failures > 0 {
				s.log.Info("fetching "+s.layout.what+" works again", s.layout.keyName, src.key.group, "stream", src.key.stream, "failures", src.failures)
				src.failures = 0
			}
			// Fetched again when this fetch may have left messages
			// behind: it stopped at its batch or bytes, or messages
			// announced are not fetched yet (JetStream may tell the
			// consumer of them after the pull ended), or announcements
			// came meanwhile. A pull that JetStream ended for want of
			// more, with all that was announced fetched, ends the
			// source's turn: another pull would only bring the same
			// answer (two more messages each way for every message at
			// low load).
			if (got > 0 && (!drained || src.storedSeq > src.fetchedSeq)) || src.announced != seen {
				s.enqueueLocked(src)
			}
		}
		s.mu.Unlock()
	}
}

// fetch fetches up to batch messages of src into the inbox and says how
// many came, and whether the consumer had no more (puller.pull).
func (s *streamSources) fetch(ctx context.Context, p *puller, src *source, batch int, wait time.Duration) (n int, drained bool, err error) {
	if src.cons == nil {
		cfg := s.consumerConfig
		cfg.Durable = src.name
		cfg.FilterSubject = src.filter
		cons, err := s.js.CreateOrUpdateConsumer(ctx, src.key.stream, cfg)
		if err != nil {
			return 0, false, err
		}
		src.cons = cons
	}
	first := true
	var last jetstream.Msg
	n, drained, err = p.pull(ctx, src.key.stream, src.name, batch, s.fetchBytes, wait, func(msg jetstream.Msg) {
		w := s.inbox.add(src.key.group, handedBack{Msg: msg, s: s, src: src})
		if first {
			src.weight, first = w, false
		}
		last = msg
	})
	if last != nil {
		if md, err := last.Metadata(); err == nil {
			s.mu.Lock()
			src.fetchedSeq = max(src.fetchedSeq, md.Sequence.Stream)
			s.mu.Unlock()
		}
	}
	if errors.Is(err, errConsumerGone) {
		src.cons = nil // removed after sourceInactive: made again
	}
	return n, drained, err
}

// sweep finds the keys with messages waiting in the streams and rings
// them: at start, and in case announcements were missed.
func (s *streamSources) sweep(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	shared := s.layout.shared
	if stream, err := s.js.Stream(ctx, shared); err != nil {
		s.log.Warn("reading a stream's state", "stream", shared, "error", err)
	} else if info, err := stream.Info(ctx, jetstream.WithSubjectFilter(">")); err != nil {
		s.log.Warn("reading a stream's state", "stream", shared, "error", err)
	} else {
		seen := map[string]bool{}
		for subject, n := range info.State.Subjects {
			key, ok := s.layout.sharedKey(subject)
			if ok && n > 0 && !seen[key] {
				seen[key] = true
				s.ring(sourceKey{stream: shared, group: key})
			}
		}
	}
	prefix := strings.TrimSuffix(s.layout.own("x"), "x")
	streams := s.js.ListStreams(ctx, jetstream.WithStreamListSubject(s.layout.ownAll))
	for info := range streams.Info() {
		key, ok := strings.CutPrefix(info.Config.Name, prefix)
		if ok && info.State.Msgs > 0 {
			s.ring(sourceKey{stream: info.Config.Name, group: key})
		}
	}
	if err := streams.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		s.log.Warn("listing the streams of "+s.layout.what, "subject", s.layout.ownAll, "error", err)
	}
}

// redeliverMargin is how long after a message handed back to JetStream
// is due again its source is fetched: JetStream hands it out again from
// its due time, and a fetch a little early finds nothing.
const redeliverMargin = 100 * time.Millisecond

// handedBack is a fetched message whose source is fetched again when it
// is handed back to JetStream (Nak, NakWithDelay): JetStream hands a
// message out again only to a pull, and a source is pulled only when
// rung, by an announcement (a message stored, not one handed back) or a
// sweep (every sourceSweepEvery). A batch that failed while a database
// was down waited for the next sweep, up to 10 s after its delay
// (TestAMessageHandedBackIsFetchedAgainWithoutASweep).
type handedBack struct {
	jetstream.Msg
	s   *streamSources
	src *source
}

func (m handedBack) Nak() error {
	err := m.Msg.Nak()
	m.s.fetchAgain(m.src, 0)
	return err
}

func (m handedBack) NakWithDelay(delay time.Duration) error {
	err := m.Msg.NakWithDelay(delay)
	m.s.fetchAgain(m.src, delay)
	return err
}

// fetchAgain rings src once a message handed back with delay is due
// again (redeliverMargin after), with one timer a source: the timer rings
// at the latest due time of its messages handed back, which a fetch then
// brings together.
func (s *streamSources) fetchAgain(src *source, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := time.Now().Add(delay + redeliverMargin)
	if !at.After(src.againAt) {
		return
	}
	src.againAt = at
	if src.again == nil {
		src.again = time.AfterFunc(time.Until(at), func() { s.dueAgain(src) })
	}
}

// dueAgain is src's timer of fetchAgain: it rings the source, or waits
// for the latest due time if one came since it was set.
func (s *streamSources) dueAgain(src *source) {
	s.mu.Lock()
	if wait := time.Until(src.againAt); wait > 0 {
		src.again.Reset(wait)
		s.mu.Unlock()
		return
	}
	src.again = nil
	s.mu.Unlock()
	s.ring(src.key)
}
