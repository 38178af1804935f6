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

// submitSources reads each group's submissions on its own, so that one
// group's backlog in NATS, however large, delays no other group's ingest:
//
//   - Submissions wait in the shared submit stream (no authentication, and
//     the coordinators' own account), or in a tenant's own stream
//     (operator mode: events.EnsureTenantSubmitStream). Each group has a
//     durable consumer of its own on each stream that holds some of its
//     submissions (a filtered one on the shared stream, the whole stream
//     on a tenant's), made when the group first shows up and removed by
//     JetStream after an hour without a pull.
//   - The streams announce each message they store, headers only
//     (events.Subjects.Stored): a group with nothing waiting costs nothing,
//     no pull and no timer. A coordinator that missed announcements (it
//     started, or its connection dropped) finds the groups with messages
//     waiting in a sweep of the streams' state, at start and every
//     sourceSweepEvery.
//   - A few fetchers take the groups with submissions announced, in turn
//     (those with nothing in the inbox first), and fetch from each what its
//     place in the fair inbox holds (a group whose queue there is full
//     waits for ingest to take from it, its submissions waiting in NATS
//     meanwhile), at most fetchBytes a fetch, without waiting for more
//     (pullNoWait). A fetch that finds nothing, with no announcement since
//     it began, makes the group idle until its next announcement.
//
// Memory is bounded by the inbox's per-group and total bounds plus one
// fetch per fetcher; JetStream keeps the rest, within each stream's
// limits.
type submitSources struct {
	js       jetstream.JetStream
	nc       *nats.Conn
	subjects events.Subjects
	log      *slog.Logger
	inbox    *fairInbox
	// consumerConfig is the configuration of every group's consumer, but
	// its name and filter.
	consumerConfig jetstream.ConsumerConfig
	fetchBytes     int
	fetchers       int
	sweepEvery     time.Duration

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

// sourceKey is a group's submissions in one stream.
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

func newSubmitSources(js jetstream.JetStream, nc *nats.Conn, subjects events.Subjects, log *slog.Logger, inbox *fairInbox) *submitSources {
	s := &submitSources{
		js: js, nc: nc, subjects: subjects, log: log, inbox: inbox,
		consumerConfig: jetstream.ConsumerConfig{
			Description: "Fairway coordinators: one group's submissions",
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
		// A fetch must be able to carry the largest message.
		fetchBytes: max(pullMaxBytes/2, int(nc.MaxPayload())),
		fetchers:   sourceFetchers,
		sweepEvery: sourceSweepEvery,
		sources:    map[sourceKey]*source{},
		byGroup:    map[string][]*source{},
	}
	s.cond = sync.NewCond(&s.mu)
	inbox.room = s.roomFor
	return s
}

// start listens to the announcements, removes the shared stream's
// consumer of earlier versions (JetStream refuses a group's filtered
// consumer beside an unfiltered one on a work-queue stream), and starts the
// fetchers and the sweeps (the first at once).
func (s *submitSources) start(ctx context.Context, subs *subscriptions, goLoop func(context.Context, func(context.Context))) error {
	if err := subs.listen(s.subjects.StoredAll(), s.announced); err != nil {
		return err
	}
	if err := s.js.DeleteConsumer(ctx, s.subjects.SubmitStream(), "ingest"); err == nil {
		s.log.Info("removed the submit stream's single consumer of an earlier version: each group has its own now")
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		s.log.Warn("removing the submit stream's consumer of an earlier version", "error", err)
	}
	for range s.fetchers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.fetchLoop(ctx)
		}()
	}
	// The first sweep runs on the loop too: a start does not wait for the
	// streams' state (thousands of tenant streams are a long listing), and
	// the announcements are heard meanwhile.
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
			}
		}
	})
	return nil
}

// stop ends the fetches: the fetchers finish the fetch in hand (its
// messages go to the inbox) and return.
func (s *submitSources) stop() {
	s.mu.Lock()
	s.stopping = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
}

// announced handles a stream's announcement of a stored message.
func (s *submitSources) announced(msg *nats.Msg) {
	group, ok := s.subjects.ParseStored(msg.Subject)
	if !ok {
		return
	}
	stream := msg.Header.Get(jetstream.StreamHeader)
	// Only the submit streams announce: a name that is not one of theirs
	// (a client publishing there by hand) is ignored.
	if stream != s.subjects.SubmitStream() && stream != s.subjects.TenantSubmitStream(group) {
		return
	}
	seq, _ := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
	s.ringSeq(sourceKey{stream: stream, group: group}, seq)
}

// ring says that key has messages waiting: it takes its turn to be
// fetched, unless it is being fetched or waits for room.
func (s *submitSources) ring(key sourceKey) { s.ringSeq(key, 0) }

// ringSeq is ring for the announcement of the message of stream sequence
// seq (0: a sweep, which knows none).
func (s *submitSources) ringSeq(key sourceKey, seq uint64) {
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
func (s *submitSources) forgetIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, src := range s.sources {
		if src.queued || src.fetching || src.full || time.Since(src.used) < sourceInactive {
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

func (s *submitSources) enqueueLocked(src *source) {
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

// newSource names a group's consumer on a stream: on the shared stream
// "ingest-<group>" filtered to the group's subjects (a group name that is
// not a valid one, which only a malformed subject carries, by its hash:
// its submissions are refused with their rejected events);
// on a tenant's stream "ingest", the whole stream.
func (s *submitSources) newSource(key sourceKey) *source {
	src := &source{key: key, name: "ingest", weight: 1}
	if key.stream == s.subjects.SubmitStream() {
		token := key.group
		if fairway.CheckName("group", token) != nil {
			sum := sha256.Sum256([]byte(token))
			token = "x" + hex.EncodeToString(sum[:8])
		}
		src.name = "ingest-" + token
		// One filter: JetStream counts a single filter's pending messages
		// from its subject tree, several ones by a scan.
		src.filter = s.subjects.SubmitGroup(key.group)
	}
	return src
}

// roomFor is called by the inbox when a group's queue has room again.
func (s *submitSources) roomFor(group string) {
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
func (s *submitSources) fetchLoop(ctx context.Context) {
	for {
		s.mu.Lock()
		for len(s.ready)+len(s.fresh) == 0 && !s.stopping {
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

		got, err := s.fetch(ctx, src, batch, wait)

		s.mu.Lock()
		src.fetching = false
		switch {
		case errors.Is(err, errConsumerGone):
			s.log.Debug("a group's consumer is gone (unused for an hour); making it again", "group", src.key.group, "stream", src.key.stream)
			s.enqueueLocked(src)
		case err != nil:
			if ctx.Err() == nil {
				// Once a second, doubling up to a minute: a group whose
				// consumer JetStream refuses (its limits) neither spins
				// nor floods the log.
				src.failures++
				wait := min(time.Second<<min(src.failures-1, 6), time.Minute)
				if src.failures == 1 || wait == time.Minute {
					s.log.Warn("fetching a group's submissions failed; they stay in NATS and are fetched again", "group", src.key.group,
						"stream", src.key.stream, "error", err, "failures", src.failures, "retry_in", wait.String())
				}
				key := src.key
				time.AfterFunc(wait, func() { s.ring(key) })
			}
		default:
			if src.failures > 0 {
				s.log.Info("fetching a group's submissions works again", "group", src.key.group, "stream", src.key.stream, "failures", src.failures)
				src.failures = 0
			}
			if got > 0 || src.announced != seen {
				s.enqueueLocked(src)
			}
		}
		s.mu.Unlock()
	}
}

// fetch fetches up to batch messages of src into the inbox and says how
// many came.
func (s *submitSources) fetch(ctx context.Context, src *source, batch int, wait time.Duration) (int, error) {
	if src.cons == nil {
		cfg := s.consumerConfig
		cfg.Durable = src.name
		cfg.FilterSubject = src.filter
		cons, err := s.js.CreateOrUpdateConsumer(ctx, src.key.stream, cfg)
		if err != nil {
			return 0, err
		}
		src.cons = cons
	}
	first := true
	var last jetstream.Msg
	n, err := pullNoWait(ctx, s.nc, src.key.stream, src.name, batch, s.fetchBytes, wait, func(msg jetstream.Msg) {
		w := s.inbox.add(src.key.group, msg)
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
	return n, err
}

// sweep finds the groups with messages waiting in the submit streams and
// rings them: at start, and in case announcements were missed.
func (s *submitSources) sweep(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	shared := s.subjects.SubmitStream()
	if stream, err := s.js.Stream(ctx, shared); err != nil {
		s.log.Warn("reading the submit stream's state", "error", err)
	} else if info, err := stream.Info(ctx, jetstream.WithSubjectFilter(s.subjects.SubmitAll())); err != nil {
		s.log.Warn("reading the submit stream's state", "error", err)
	} else {
		seen := map[string]bool{}
		for subject, n := range info.State.Subjects {
			rest, ok := strings.CutPrefix(subject, s.subjects.Prefix+".submit.")
			group, _, _ := strings.Cut(rest, ".")
			if ok && n > 0 && group != "" && !seen[group] {
				seen[group] = true
				s.ring(sourceKey{stream: shared, group: group})
			}
		}
	}
	prefix := strings.TrimSuffix(s.subjects.TenantSubmitStream("x"), "x")
	streams := s.js.ListStreams(ctx, jetstream.WithStreamListSubject(s.subjects.TenantSubmitAll()))
	for info := range streams.Info() {
		group, ok := strings.CutPrefix(info.Config.Name, prefix)
		if ok && info.State.Msgs > 0 {
			s.ring(sourceKey{stream: info.Config.Name, group: group})
		}
	}
	if err := streams.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		s.log.Warn("listing the tenants' submit streams", "error", err)
	}
}
