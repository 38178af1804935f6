package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

// LeaderConfig configures a Leader.
type LeaderConfig struct {
	// Partition is the partition it leads.
	Partition int16
	// Holder names this coordinator in the lease.
	Holder string
	// TTL is the lease's length (default 1.5 s); Renew how often the
	// holder renews it and the others try to take it (default 0.5 s).
	TTL, Renew time.Duration
	// Balance, when set, says which partitions this coordinator takes and
	// keeps (a Balancer, with partitions over several coordinators); nil:
	// it takes the lease whenever it can.
	Balance Balance
	// Registry is where the executors' registry is (fairway_executor, in
	// the cluster's home database), which ReleaseLost reads; nil: the
	// partition's own database.
	Registry Querier
	// Shared says the database holds other partitions too: the leader's
	// rewrite of fairway_live_job then deletes its own partition's rows
	// rather than emptying the table (live.go).
	Shared bool
	// Poll is how often the leader reads the tail (default 50 ms); Wake
	// reads it at once.
	Poll time.Duration
	// PublishedNote is how often at most the leader records where its
	// published events reach (default 50 ms; Leader.publish).
	PublishedNote time.Duration
	// RecentBytes bounds the bodies of the submitted rows folded last
	// that the leader keeps, so that claims take their jobs' arguments
	// from memory (default 16 MiB; recentRows): a million waiting jobs of
	// 200-byte arguments are 64 rows of 16,000 jobs in 16 MiB.
	RecentBytes int
	// SnapshotRows and SnapshotEvery: a snapshot is taken once this many
	// rows were folded since the last one (default 100,000), or this long
	// passed (default 10 s) with changes folded since that are worth at
	// least snapshotShare of the state (snapshotDue), so that a successor
	// folds at most that much, and a large state is not written again
	// for a few changes.
	SnapshotRows  int
	SnapshotEvery time.Duration
	// Records reads the final states of ended jobs of group (their
	// records): the leader resolves a new job's dependency that ended
	// before its submission was folded from it. Nil: the records the
	// leader writes in fairway_job at each job's end.
	Records func(ctx context.Context, group string, ids []string) (map[string]fairway.State, error)
	// Fairness is what the fair shares count (scheduler.fairness:
	// fairness.ByJobs, the default, or fairness.ByTime). Counting jobs
	// with every weight 1, a claim is the round-robin alone.
	Fairness string
	// Publish publishes the events of the rows the leader folds (nil:
	// none are made). It returns once the events are stored (JetStream
	// acknowledged them); an error keeps them, to be published again.
	// The journal is their outbox: see events.go.
	Publish func(ctx context.Context, events []fairway.Event) error
	// Claimable is called when jobs may have become claimable: a fold
	// made some waiting or stuck, or freed a held one's place (limits),
	// or a delayed job's time came, or this coordinator came to lead.
	// The coordinator wakes its idle executors' parked requests. It is
	// called outside the leader's lock and must not block.
	Claimable func()
	// Leading is called when this coordinator comes to lead the partition
	// (true: before the Claimable call that says so) and when it stops
	// (false), from Run's goroutine, outside the lock: the coordinator
	// serves what only the leader can (executors' dispatch requests)
	// while it leads, so that a follower holds none of them back.
	Leading func(bool)
	// Logger is the leader's, scoped by the caller to the partition (its
	// lines name no partition of their own).
	Logger *slog.Logger
	// BeforeClaimAppend, when set, is called by a claim that took jobs,
	// right before it appends its row: the fault suite's hook
	// (internal/chaos, a coordinator built with the tag fairwaychaos)
	// freezes the leader there, to resume past its lease and try to
	// commit. Not by a hand-over (HandOver): frozen past JetStream's ack
	// wait, its submissions are redelivered and stored by another
	// coordinator meanwhile, and the resumed hand-over finds their ids
	// taken and appends nothing, which exercises no fencing (its refusal
	// is TestADeposedLeadersHandOverIsRefused's).
	BeforeClaimAppend func()
	// LivePoll is how often the leader looks for a reader of
	// fairway_live, the operators' view of the unfinished jobs, that waits
	// for it to write them (live.go; 100 ms by default).
	LivePoll time.Duration
	// Clock is this coordinator's host clock (nil: time.Now; the fault
	// suite skews it), read until the first renewal of the lease: the
	// leader times the jobs by PostgreSQL's clock, as the rows' times are
	// (Leader.Now).
	Clock func() time.Time
	// Unreachable, when set, says whether an error of a call to the
	// partition's database means it could not be reached (down, refusing
	// connections, the connection lost): the leader then tries it at its
	// probes only (Leader.Observe). Nil: never.
	Unreachable func(error) bool
	// CallTimeout bounds a call to the partition's database (a fold, an
	// append, a renewal of the lease; 10 s by default; a restore and a
	// snapshot, which read or write the whole state, get six times as
	// long): one that gets no answer within it fails with ErrNoAnswer,
	// and the database is taken for unreachable (Observe). Unbounded, a
	// frozen primary held the leader's lock, and every dispatch request
	// with it, for as long as it stayed frozen.
	CallTimeout time.Duration
	// JournalAge is how long the journal keeps its rows at least (an hour
	// by default): the leader deletes older ones, every PruneEvery (a
	// minute), but those that carry an unfinished job's arguments
	// (prune.go); a coordinator that has not read the journal for half of
	// it restores from the last snapshot.
	JournalAge, PruneEvery time.Duration
}

func (c LeaderConfig) withDefaults() LeaderConfig {
	c.TTL = cmp.Or(c.TTL, 1500*time.Millisecond)
	c.Renew = cmp.Or(c.Renew, 500*time.Millisecond)
	c.Poll = cmp.Or(c.Poll, 50*time.Millisecond)
	c.PublishedNote = cmp.Or(c.PublishedNote, 50*time.Millisecond)
	c.SnapshotRows = cmp.Or(c.SnapshotRows, 100_000)
	c.RecentBytes = cmp.Or(c.RecentBytes, 16<<20)
	c.SnapshotEvery = cmp.Or(c.SnapshotEvery, 10*time.Second)
	c.LivePoll = cmp.Or(c.LivePoll, 100*time.Millisecond)
	c.JournalAge = cmp.Or(c.JournalAge, time.Hour)
	c.PruneEvery = cmp.Or(c.PruneEvery, time.Minute)
	c.CallTimeout = cmp.Or(c.CallTimeout, 10*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

// Leader follows a partition, and leads it when it holds its lease: it
// holds the partition's state, restored once from the last snapshot and
// then the fold of every row the tail reads, leader or not (a hot
// follower: taking over restores nothing), and while it leads it
// snapshots the state as it goes. A coordinator runs one per partition;
// the one that holds the lease leads, the others try to take it every
// Renew and take over within the lease's TTL when the leader stops
// renewing it (dead, frozen, cut off from PostgreSQL).
type Leader struct {
	cfg  LeaderConfig
	db   Querier
	wake chan struct{}
	// trimFailedLog is when trimFollowed last logged a failed read (Run's
	// goroutine only): at most one line a minute while the database is
	// down, where the renewals come every half second.
	trimFailedLog time.Time
	// contend makes the lease's next try come now (Contend).
	contend chan struct{}
	// readWanted: a Wake since the last catch-up asked for a read of the
	// tail (wakeToPublish does not).
	readWanted atomic.Bool
	// wakes counts the Wakes, and readTo is wakes as of the start of the
	// last read of the tail: while they differ, a row that a Wake
	// announced (a submission this coordinator committed) may not be
	// folded yet, and HandOver reads the tail first (its picks, made from
	// its own batch, would pass over that row's jobs). A read returns at
	// most readBytes: behind a backlog that large, the state's own work
	// for the executor is what keeps HandOver from handing over.
	wakes, readTo atomic.Uint64
	// pgClock is PostgreSQL's clock as the last renewal of the lease read
	// it (Now); nil before the first. floor is the latest time Now gave
	// or a folded row bears (Unix µs): Now never goes below it.
	pgClock atomic.Pointer[pgReading]
	floor   atomic.Int64
	// restored is closed once the state is restored (it is never
	// dropped after).
	restored chan struct{}

	// The lanes order the leader's appends: a claim holds claims, a batch
	// of executors' reports holds reports, every other append (cancels,
	// releases, resolutions, expiry, weights…) holds both. So a claim and
	// a batch of reports may be in flight together, and mu is let go over
	// their round trips to PostgreSQL: their rows commute, whichever a
	// reader folds first. A claim names waiting jobs only (reserved in the
	// queues until its row is folded), a report held ones only, and their
	// other effects on the state add up (the held counts, the shares'
	// charges and run times, the claims' cursor, which reports do not
	// touch). Everything whose order matters with a claim (a cancel, an
	// expiry, a release) waits for both lanes (docs/journal.md, "Who
	// appends what"). Lock order: claims, reports, mu.
	claims, reports sync.Mutex

	mu      sync.RWMutex
	leading bool
	lease   Lease  // while leading
	state   *State // once restored
	queues  *Queues
	tail    *Tail
	// restores counts the restores from a snapshot (one, unless reading
	// the journal failed).
	restores int
	// looped is when Run's loop last came round (Unix ns):
	// renewBeside stops renewing the lease of a loop that is stuck.
	looped atomic.Int64
	// lockedCall is when the call to the database made holding mu that
	// is in progress began (Unix ns; 0: none): Stalled.
	lockedCall atomic.Int64
	// resigned says Resign gave the lease up: it is not taken again.
	// acquiring is held by a try to take or renew the lease and by
	// Resign, so that no try in progress takes the lease back after
	// Resign gave it up. mayHold says the last try may have left this
	// coordinator holding the lease (it took or renewed it, or its
	// answer was lost), whether or not Run's loop applied the answer
	// yet: Resign gives it up then. Both under acquiring.
	resigned  atomic.Bool
	acquiring sync.Mutex
	mayHold   bool
	// sinceSnapshot counts the rows folded since the last snapshot, and
	// changedSince the changes they made; snapshotAt is when it was taken.
	sinceSnapshot int
	changedSince  int
	snapshotAt    time.Time
	// resolve are the resolutions the leader owes (Change.Dependents,
	// Change.Unknown): it appends them as a resolved row.
	resolve []pendingResolution
	// owed: leading anew, the leader has not yet worked out what its
	// predecessor left unresolved.
	owed bool
	// unsure: an append of the leader's failed, and may have committed
	// all the same (PostgreSQL lost at the commit: a failover). Until a
	// fold has read the tail since, a claim or a batch of reports folds
	// first (lockLed): a claim sent again under its request's id must
	// find the jobs that row claimed for it, else they stay held by an
	// attempt nobody runs (fault scenario journal-postgres-failover).
	unsure bool
	// unreachable: the partition's database could not be reached at the
	// last call observed (Observe); probeGap and probeAt pace Run's reads
	// meanwhile (probe).
	unreachable atomic.Bool
	probeGap    time.Duration
	probeAt     time.Time
	// held are the submissions of the jobs this leader's claims handed
	// out, read by the claim, while they are held: their records need
	// them (a job held before this leader led is read at its end).
	heldSubs map[fairway.JobRef]heldSubmission
	// recent are the submitted rows folded last (recentRows).
	recent *recentRows
	// pending are the events of the rows folded that published does not
	// cover (LeaderConfig.Publish): the leader publishes them, the others
	// keep them until the leader's position says they are published.
	pending []pendingEvent
	sending *sending // the batch of them publish is handing on
	// notedAt is when publish last recorded where the published events
	// reach (LeaderConfig.PublishedNote; Run's goroutine only).
	notedAt time.Time
	// noted is the position publish last recorded, and quietRows the
	// rows folded that it covers, or that noteQuiet last looked at (Run's
	// goroutine only); rowsFolded counts the rows folded (under mu).
	noted      string
	quietRows  uint64
	rowsFolded uint64
	published  *snapshotView
	// claimable: a fold since the last LeaderConfig.Claimable call made
	// jobs claimable (or freed a place).
	claimable bool
	// told is what LeaderConfig.Leading was last told (Run's goroutine
	// only).
	told bool
	// live is what the leader tracks for fairway_live_job (live.go).
	live liveTable
	// readAt is when a fold last read the journal (prune.go).
	readAt time.Time
	// folded is closed at the next fold that read the journal, and
	// replaced (Leader.Folded).
	folded chan struct{}
}

// heldSubmission is what a held job's record needs of its submission.
type heldSubmission struct {
	at   time.Time
	item Item
}

// pendingResolution is a job waiting for a dependency that ended: known
// (the fold saw it end: final is its state) or not (its record says).
type pendingResolution struct {
	job, dependency fairway.JobRef
	final           fairway.State // "" until read from the record
}

// NewLeader makes a Leader of cfg.Partition on db (a pool).
func NewLeader(db Querier, cfg LeaderConfig) *Leader {
	cfg = cfg.withDefaults()
	return &Leader{cfg: cfg, db: db, wake: make(chan struct{}, 1), contend: make(chan struct{}, 1), restored: make(chan struct{}), heldSubs: map[fairway.JobRef]heldSubmission{}, recent: newRecentRows(cfg.RecentBytes)}
}

// pgReading is PostgreSQL's clock (at) read at an instant of this
// process's monotonic clock (mono: the middle of the round trip).
type pgReading struct{ at, mono time.Time }

// Now is PostgreSQL's clock, as this coordinator reads it: the time the
// last renewal of the lease read (clock_timestamp(), every
// LeaderConfig.Renew) plus the monotonic time since, within half a round
// trip, never going back nor below the time of a row the fold read;
// before the first renewal, the host clock (LeaderConfig.Clock). The
// jobs' times are PostgreSQL's (the rows', stamped by now()), and so is
// every decision the leader takes on them (a job due, expired, held too
// long, a retry's time, a rate bucket's refill), so that a host clock that
// is wrong or steps (a bad RTC, NTP) — the monotonic clock never steps —
// neither runs delayed jobs early nor holds retried ones back, a
// coordinator that takes over finds the times it expects, and a clock
// behind the rows' does not starve a rate-limited task (a bucket refilled
// to a time before its last take refills nothing).
func (l *Leader) Now() time.Time {
	r := l.pgClock.Load()
	if r == nil {
		return l.cfg.Clock() // a follower's: it raises no floor
	}
	return time.UnixMicro(l.raiseFloor(r.at.Add(time.Since(r.mono)).UnixMicro()))
}

// raiseFloor raises the floor of Now to at, and returns the floor.
func (l *Leader) raiseFloor(at int64) int64 {
	for {
		f := l.floor.Load()
		if at <= f {
			return f
		}
		if l.floor.CompareAndSwap(f, at) {
			return at
		}
	}
}

// Wake makes the leader read the tail now (rows were appended).
func (l *Leader) Wake() {
	l.wakes.Add(1)
	l.readWanted.Store(true)
	l.wakeToPublish()
}

// Contend makes the next try to take, renew or give up the lease come
// now rather than at the next Renew: what LeaderConfig.Balance says has
// changed (partitions led with the first: it came to lead, or stopped).
func (l *Leader) Contend() {
	select {
	case l.contend <- struct{}{}:
	default:
	}
}

// wakeToPublish makes Run's loop come round now without reading the tail
// for it: the leader appended rows and folded the read of the tail that
// went with them, whose events the loop publishes. A read for that alone
// found nothing new, or what a Wake or the poll reads anyway: 40% of the
// reads of the tail with short jobs (docs/performance.md, "2026-11-30,
// fifth session").
func (l *Leader) wakeToPublish() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// View calls f with the state and the lease while this coordinator leads
// (ok false otherwise), under a read lock: f must not keep the state.
func (l *Leader) View(f func(s *State, lease Lease)) (ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.leading || l.state == nil {
		return false
	}
	f(l.state, l.lease)
	return true
}

// Follow calls f with the state as this coordinator has folded it so far,
// leader or not (ok false before it is restored), under a read lock.
func (l *Leader) Follow(f func(s *State)) (ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.state == nil {
		return false
	}
	f(l.state)
	return true
}

// MayHoldClaim says whether claim key may hold jobs in the partition:
// the state holds jobs it claimed, or an append of the leader's failed
// and may have committed (a claim or a hand-over under key among them),
// not read back since. A coordinator that answers a request sent again
// under key without asking the leader then keeps key for the partition
// (coordinator's reclaimUnsure), for a claim under it that folds first.
func (l *Leader) MayHoldClaim(key ClaimKey) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.state != nil && (l.unsure || len(l.state.ClaimedBy(key)) > 0)
}

// Restored is closed once this coordinator has restored the partition's
// state (and, leading it, serves its dispatch requests).
func (l *Leader) Restored() <-chan struct{} { return l.restored }

// Restores counts the times the state was restored from a snapshot.
func (l *Leader) Restores() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.restores
}

// Run follows the partition, tries to take the lease and leads while it
// holds it, until ctx ends. A leader that ends gives nothing up: its lease runs out
// (a process killed does the same), unless Resign gave it up first.
func (l *Leader) Run(ctx context.Context) {
	var background sync.WaitGroup
	background.Go(func() { every(ctx, l.cfg.LivePoll, l.answerLive) })
	background.Go(func() { every(ctx, l.cfg.PruneEvery, l.prune) })
	defer background.Wait()
	poll := time.NewTicker(l.cfg.Poll)
	defer poll.Stop()
	l.looped.Store(time.Now().UnixNano())
	l.renewed(ctx, l.acquire(ctx))
	renewals := make(chan renewal, 1)
	background.Go(func() {
		everyOr(ctx, l.cfg.Renew, l.contend, func(ctx context.Context) { l.renewBeside(ctx, renewals) })
	})
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	read := true
	for {
		l.looped.Store(time.Now().UnixNano())
		// Restored and caught up at once, then at each tick or wake (a
		// wake to publish reads nothing: wakeToPublish).
		wakes := l.wakes.Load()
		wanted := l.readWanted.Swap(false)
		if l.probe(time.Now()) {
			err := l.catchUp(ctx, read || wanted)
			if err != nil {
				l.Observe(err)
			}
			if err == nil && (read || wanted) {
				l.readTo.Store(wakes)
			}
			if err != nil && ctx.Err() == nil && l.Reachable() {
				l.cfg.Logger.Warn("reading the journal", "error", err)
			}
		}
		l.tellClaimable()
		due.Reset(l.untilDue())
		select {
		case <-ctx.Done():
			l.drop()
			l.tellLeading()
			return
		case r := <-renewals:
			l.renewed(ctx, r)
			read = true
		case <-poll.C:
			read = true
		case <-l.wake:
			read = false // unless a Wake asked for it (readWanted)
		case <-due.C:
			read = false
			// A delayed job's time came: into its list, out of the
			// timers (the next timer is then the next wait).
			l.mu.Lock()
			if l.queues != nil {
				l.queues.Due(l.Now().UnixMicro())
			}
			l.claimable = true
			l.mu.Unlock()
		}
	}
}

// Resign gives the lease up, for a coordinator that stops: it runs out
// now (Yield), so that a follower takes it at its next try (every Renew)
// rather than once it has run out; this Leader leads no more and takes it
// no more. The appends in progress end first; later ones are refused. A
// process killed gives nothing up: its lease runs out.
func (l *Leader) Resign(ctx context.Context) error {
	l.acquiring.Lock() // no try to take or renew the lease in progress
	defer l.acquiring.Unlock()
	// Under mu with leading's change: an answer applied after this sees
	// resigned. Whether to give the lease up is the last try's answer,
	// not leading: a renewal answered but not applied yet holds it too
	// (read from leading, a renewal applied between resigned and the
	// read cleared it, and the lease stayed held for its TTL: CI's
	// TestAResigningLeaderGivesItsLeaseUp, 1 run in 20 under load).
	l.mu.Lock()
	l.resigned.Store(true)
	l.leading = false
	l.mu.Unlock()
	if !l.mayHold {
		return nil
	}
	yielded, err := Yield(ctx, l.db, l.cfg.Partition, l.cfg.Holder, l.cfg.TTL)
	if err != nil {
		return err
	}
	l.mayHold = false
	if yielded {
		l.cfg.Logger.Info("this coordinator gave journal partition up: it stops")
	}
	return nil
}

// every calls do every d until ctx ends: the leader's work beside its
// fold, which neither holds the fold back nor waits for it (fairway_live,
// the journal's retention).
func every(ctx context.Context, d time.Duration, do func(context.Context)) { everyOr(ctx, d, nil, do) }

// everyOr is every, also calling do when now says so (nil: never).
func everyOr(ctx context.Context, d time.Duration, now <-chan struct{}, do func(context.Context)) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-now:
		}
		do(ctx)
	}
}

// tellLeading calls LeaderConfig.Leading when this coordinator came to
// lead or stopped since the last call. Run's goroutine only.
func (l *Leader) tellLeading() {
	if l.cfg.Leading == nil {
		return
	}
	l.mu.RLock()
	leading := l.leading
	l.mu.RUnlock()
	if leading != l.told {
		l.told = leading
		l.cfg.Leading(leading)
	}
}

// tellClaimable calls LeaderConfig.Claimable, outside the lock, if a fold
// made jobs claimable since the last call.
func (l *Leader) tellClaimable() {
	l.mu.Lock()
	tell := l.claimable && l.cfg.Claimable != nil
	l.claimable = false
	l.mu.Unlock()
	if tell {
		l.cfg.Claimable()
	}
}

// untilDue is how long until the next delayed job comes due (an hour at
// most, when none waits).
func (l *Leader) untilDue() time.Duration {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.queues == nil || l.cfg.Claimable == nil {
		return time.Hour
	}
	at, ok := l.queues.NextDue()
	if !ok {
		return time.Hour
	}
	return min(max(time.Until(time.UnixMicro(at)), 0), time.Hour)
}

// renewal is an answer to a try to take or renew the lease.
type renewal struct {
	lease Lease
	ok    bool
	err   error
	// yielded says the lease was given up (Balance.Keep said so).
	yielded bool
}

// acquire tries to take or renew the lease, and reads PostgreSQL's clock
// (Now) when it gets it.
func (l *Leader) acquire(ctx context.Context) renewal {
	l.acquiring.Lock()
	defer l.acquiring.Unlock()
	if l.resigned.Load() {
		return renewal{}
	}
	if b := l.cfg.Balance; b != nil {
		l.mu.RLock()
		leading := l.leading
		l.mu.RUnlock()
		switch {
		case leading && !b.Keep(l.cfg.Partition):
			ctx, cancel := bounded(ctx, l.cfg.CallTimeout)
			defer cancel()
			yielded, err := Yield(ctx, l.db, l.cfg.Partition, l.cfg.Holder, l.cfg.TTL)
			l.mayHold = err != nil // not yielded: another held it
			return renewal{err: answered(ctx, err), yielded: yielded}
		case !leading && !b.Take(l.cfg.Partition):
			return renewal{}
		}
	}
	sent := time.Now()
	call, cancel := bounded(ctx, l.cfg.CallTimeout)
	defer cancel()
	lease, ok, err := Acquire(call, l.db, l.cfg.Partition, l.cfg.Holder, l.cfg.TTL)
	l.mayHold = ok || err != nil // an error may have come after the commit
	err = answered(call, err)
	if ctx.Err() == nil {
		l.Observe(err) // the probe that finds the database back
	}
	if err == nil && ok {
		l.pgClock.Store(&pgReading{at: lease.At, mono: sent.Add(time.Since(sent) / 2)})
	}
	return renewal{lease: lease, ok: ok, err: err}
}

// stuckLoop is how long Run's loop may take to come round before the
// lease is let go: renewed beside the loop, the lease outlasts a fold
// longer than its TTL (a resolution of many dependents on a loaded
// machine, a restore), but not a loop that is stuck.
const stuckLoop = 30 * time.Second

// renewBeside renews the lease (every Renew, beside Run's loop, which
// applies the answers: out holds the last one not yet applied): a fold
// longer than the lease's TTL no longer loses it, since the fencing that
// matters is PostgreSQL's (every append checks the epoch). A loop that has
// not come round for stuckLoop is renewed no more, and so loses the lease.
func (l *Leader) renewBeside(ctx context.Context, out chan renewal) {
	if stuck := time.Since(time.Unix(0, l.looped.Load())); stuck > stuckLoop {
		l.cfg.Logger.Warn("the journal's loop has not come round: not renewing the lease, so that another coordinator takes over",
			"for", stuck.Round(time.Second).String())
		return
	}
	r := l.acquire(ctx)
	select {
	case <-out: // an older answer, not applied yet
	default:
	}
	out <- r
}

// trimFollowed makes a follower forget the events the leader has
// published (read without the lock, which the fold and the verbs wait
// for).
func (l *Leader) trimFollowed(ctx context.Context) {
	l.mu.RLock()
	leading := l.leading
	l.mu.RUnlock()
	if leading || l.cfg.Publish == nil {
		return
	}
	v, err := readPublished(ctx, l.db, l.cfg.Partition)
	if err != nil {
		if ctx.Err() == nil && time.Since(l.trimFailedLog) >= time.Minute {
			l.trimFailedLog = time.Now()
			l.cfg.Logger.Warn("reading where the journal's events were published (logged once a minute while it fails)", "error", err)
		}
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leading { // renewed alone makes it lead, and only Run calls it
		l.trimPublished(v)
	}
}

// renewed applies the answer to a try to take or renew the lease; a
// follower then forgets the events the leader has published. Run's
// goroutine only.
func (l *Leader) renewed(ctx context.Context, r renewal) {
	l.applyRenewal(ctx, r)
	if r.err == nil {
		l.trimFollowed(ctx)
	}
}

func (l *Leader) applyRenewal(ctx context.Context, r renewal) {
	lease, ok, err := r.lease, r.ok, r.err
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		if ctx.Err() == nil {
			l.cfg.Logger.Warn("renewing the journal lease: PostgreSQL did not answer", "error", err)
		}
		// The lease may run out meanwhile: lead no longer than it lasts.
		if l.leading && l.Now().After(l.lease.Until) {
			l.leading = false
		}
	case l.resigned.Load():
		l.leading = false // an answer from before Resign: it leads no more
	case r.yielded && l.leading:
		l.cfg.Logger.Info("this coordinator gave journal partition up, to a coordinator with fewer than its share")
		l.leading = false
	case !ok && l.leading:
		l.cfg.Logger.Info("another coordinator leads journal partition now")
		l.leading = false
	case ok && (!l.leading || lease.Epoch != l.lease.Epoch):
		l.leading, l.lease = true, lease
		l.sinceSnapshot, l.changedSince, l.snapshotAt = 0, 0, time.Now()
		l.resolve, l.owed = nil, true
		l.live.dirty = nil // rewritten whole (live.go)
		l.claimable = true // the requests that waited for a leader
		l.cfg.Logger.Info("this coordinator leads journal partition now", "epoch", lease.Epoch)
	case ok:
		l.lease = lease
	}
}

// restore reads the last snapshot, once.
func (l *Leader) restore(ctx context.Context) error {
	if l.state != nil {
		return nil
	}
	began := time.Now()
	ctx, cancel := bounded(ctx, wholeState*l.cfg.CallTimeout)
	defer cancel()
	defer l.callLocked()()
	state, tail, err := LoadSnapshot(ctx, l.db, l.cfg.Partition)
	if err != nil {
		return answered(ctx, err)
	}
	if l.cfg.Publish != nil {
		// The rows after the snapshot whose events were published make
		// none again.
		if l.published, err = readPublished(ctx, l.db, l.cfg.Partition); err != nil {
			return answered(ctx, err)
		}
	}
	l.state, l.tail = state, tail
	l.queues = NewQueues(state, l.Now().UnixMicro())
	if l.restores == 0 {
		close(l.restored)
	}
	l.restores++
	l.cfg.Logger.Info("journal partition restored", "jobs", state.Jobs.Len(), "in", time.Since(began).String())
	return nil
}

// catchUp folds what the tail reads, to its end, appends what the leader
// owes (resolutions, expiry), publishes the events and takes a snapshot
// when one is due. The fold holds the lock (View waits for a fold in
// progress), what it appends holds both lanes too, and the publishing
// holds neither: claims and reports go on meanwhile. A snapshot saved by
// a leader that lost the lease without knowing is still a state and its
// position, only older than its successor's: restoring it replays more
// rows, never wrong ones.
func (l *Leader) catchUp(ctx context.Context, read bool) error {
	l.tellLeading()
	l.mu.Lock()
	err := l.restore(ctx)
	if err == nil && (read || l.unsure || l.tail.Position() == "") {
		if err = l.fold(ctx, nil); err == nil {
			l.Observe(nil) // the database answers (a probe, while it was unreachable)
		}
	}
	if err == nil {
		// With nothing to publish, the snapshot goes with the fold, under
		// the same lock (View sees both or neither).
		err = l.snapshotIfDue(ctx)
	}
	now := l.Now().UnixMicro()
	owes := err == nil && l.leading && (l.owed || len(l.resolve) > 0 || l.queues.ExpiryDue(now) || l.queues.TriggerDue(now))
	l.mu.Unlock()
	if err != nil {
		return err
	}
	// The waiting requests are woken before the publishing, which waits
	// for JetStream.
	l.tellClaimable()
	if owes {
		if err := l.lockLeading(ctx); err != nil {
			if errors.Is(err, ErrNotLeading) {
				return nil // led no more meanwhile
			}
			return err
		}
		err := l.settle(ctx)
		if err == nil {
			err = l.expire(ctx)
		}
		l.unlockLeading()
		if err != nil {
			return err
		}
		l.tellClaimable()
	}
	if err := l.publish(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snapshotIfDue(ctx)
}

// snapshotIfDue takes a snapshot when one is due, while leading. A
// snapshot covers only rows whose events are published (none pending): a
// successor restoring it makes the events of the rows after it. Called
// with l.mu held.
func (l *Leader) snapshotIfDue(ctx context.Context) error {
	if !l.leading || !l.snapshotWanted() || len(l.pending) > 0 {
		return nil
	}
	ctx, cancel := bounded(ctx, wholeState*l.cfg.CallTimeout)
	defer cancel()
	defer l.callLocked()()
	if err := SaveSnapshot(ctx, l.db, l.state, l.tail); err != nil {
		return answered(ctx, err)
	}
	l.sinceSnapshot, l.changedSince, l.snapshotAt = 0, 0, time.Now()
	return nil
}

// snapshotWanted says whether a snapshot is due (snapshotDue). Called
// with l.mu held, the state restored.
func (l *Leader) snapshotWanted() bool {
	return snapshotDue(l.cfg, l.sinceSnapshot, l.changedSince, l.state.Jobs.Len(), time.Since(l.snapshotAt))
}

// snapshotShare is the part of the state's jobs that the changes folded
// since the last snapshot must reach before SnapshotEvery takes another.
// A snapshot writes the whole state (a million waiting jobs: a second of
// CPU and tens of MiB of WAL), and its successor replays the changes
// since: taken every SnapshotEvery whatever the size, a large state cost
// the leader more in snapshots than in the jobs drained (bench scale);
// taken once the changes are an eighth of it, a snapshot costs a bounded
// share per change, and a successor replays at most an eighth of a
// restore (or SnapshotRows rows) more.
const snapshotShare = 8

// snapshotDue says whether a snapshot is due, rows and changes having
// been folded since the last one, of a state of jobs, taken elapsed ago.
func snapshotDue(cfg LeaderConfig, rows, changes, jobs int, elapsed time.Duration) bool {
	if rows >= cfg.SnapshotRows {
		return true
	}
	return rows > 0 && elapsed >= cfg.SnapshotEvery && changes >= jobs/snapshotShare
}

// fold applies to the state every row the tail reads now, starting with
// read (nil: none), the read an append queued after its commit
// (Tail.Queue), and keeps the queues up to date with the changes. Called
// with l.mu held.
func (l *Leader) fold(ctx context.Context, read *TailRead) error {
	ctx, cancel := bounded(ctx, l.cfg.CallTimeout)
	defer cancel()
	defer l.callLocked()()
	if !l.leading && !l.readAt.IsZero() && time.Since(l.readAt) > l.cfg.JournalAge/2 {
		// The rows after its position may be pruned (prune.go): from the
		// last snapshot instead.
		l.cfg.Logger.Warn("journal partition not read for a long time: restoring from its last snapshot",
			"last read", l.readAt.Format(time.RFC3339), "journal kept", l.cfg.JournalAge.String())
		l.state, l.pending, l.sending, l.readAt = nil, nil, nil, time.Time{}
		if err := l.restore(ctx); err != nil {
			return err
		}
	}
	n, err := l.tail.FoldRead(ctx, l.db, l.state, read, func(row Row, changes []Change) {
		l.raiseFloor(row.At.UnixMicro())
		if row.Kind == Submitted && len(changes) > 0 {
			l.recent.keep(row.ID, row.At, row.Body)
		}
		l.changedSince += len(changes)
		if l.cfg.Publish != nil && (l.published == nil || !l.published.ended(row.XID)) {
			l.pending = pendingOf(l.pending, row, changes)
		}
		now := l.Now().UnixMicro()
		for _, c := range changes {
			if claimable(c.To) || held(c.From) {
				l.claimable = true
			}
			l.queues.Release(now, c.Job)
			if held(c.From) && !held(c.To) {
				delete(l.heldSubs, c.Job)
			}
			if !l.leading {
				continue // a successor works out what it owes when it takes over
			}
			l.live.note(c)
			for _, id := range c.Dependents {
				l.resolve = append(l.resolve, pendingResolution{job: fairway.JobRef{Group: c.Job.Group, ID: id}, dependency: c.Job, final: c.To})
			}
			for _, id := range c.Unknown {
				l.resolve = append(l.resolve, pendingResolution{job: c.Job, dependency: fairway.JobRef{Group: c.Job.Group, ID: id}})
			}
		}
	})
	l.sinceSnapshot += n
	l.rowsFolded += uint64(n) //nolint:gosec // G115: a count of rows
	err = answered(ctx, err)
	if err != nil {
		// Before the lock is let go: what waits for it finds the
		// database unreachable (lockLed), rather than trying it again.
		l.Observe(err)
	}
	if err == nil {
		l.unsure = false // whatever an append that failed committed is folded now
		l.readAt = time.Now()
		if l.folded != nil {
			close(l.folded)
			l.folded = nil
		}
	}
	return err
}

// settleRounds bounds the resolved rows one catch-up appends: each may
// end dependents in turn (a failure cancels a chain link by link); what
// is left waits for the next.
const settleRounds = 8

// settle appends the resolutions the leader owes (the dependents of jobs
// that ended, and the dependencies a new job named that had ended before
// it; those are read from their records), as resolved rows, and folds
// them. Leading anew, it first works out what its predecessor left: the
// pending jobs that wait for a job the state no longer holds. Called with
// l.mu held, while leading.
func (l *Leader) settle(ctx context.Context) error {
	if l.owed {
		for ref, j := range l.state.Jobs.All() {
			for _, w := range j.Waits() {
				dep := fairway.JobRef{Group: ref.Group, ID: w}
				if l.state.Jobs.Get(dep) == nil {
					l.resolve = append(l.resolve, pendingResolution{job: ref, dependency: dep})
				}
			}
		}
		l.owed = false
	}
	for range settleRounds {
		if len(l.resolve) == 0 {
			return nil
		}
		finals, err := l.records(ctx)
		if err != nil {
			return err
		}
		var items []Item
		var keep, sent []pendingResolution
		seen := map[pendingResolution]bool{}
		for _, r := range l.resolve {
			if key := (pendingResolution{job: r.job, dependency: r.dependency}); seen[key] {
				continue // owed twice (seen ending, and found at a takeover)
			} else {
				seen[key] = true
			}
			final := cmp.Or(r.final, finals[r.dependency])
			if final == "" {
				keep = append(keep, r) // no record to read it from: it waits
				continue
			}
			it := Item{Group: r.job.Group, ID: r.job.ID, Waits: []string{r.dependency.ID}}
			switch final {
			case fairway.StateSuccess:
			case fairway.StateCancelled:
				it.Error = fmt.Sprintf("dependency %s was cancelled", r.dependency.ID)
			case stateUnknown:
				it.Error = fmt.Sprintf("dependency %s is not known (never submitted, or pruned)", r.dependency.ID)
			default:
				it.Error = fmt.Sprintf("dependency %s failed", r.dependency.ID)
			}
			items = append(items, it)
			sent = append(sent, pendingResolution{job: r.job, dependency: r.dependency, final: final})
		}
		l.resolve = keep
		if len(items) == 0 {
			return nil
		}
		read, err := l.appendBatches(ctx, []batch{{kind: Resolved, items: items}})
		if err != nil {
			if errors.Is(err, ErrFenced) {
				l.resolve = nil
				return nil
			}
			// Owed still, with what is known of them: tried again at the
			// next catch-up.
			l.resolve = append(l.resolve, sent...)
			return err
		}
		if err := l.fold(ctx, read); err != nil {
			return err
		}
	}
	return nil
}

// lockLeading takes both lanes and the lock and folds the state, for
// what only the leader appends, in any order with claims and reports:
// ErrNotLeading when this coordinator does not lead (and nothing is
// locked). The caller calls unlockLeading when done.
func (l *Leader) lockLeading(ctx context.Context) error {
	l.claims.Lock()
	l.reports.Lock()
	err := l.lockLed(ctx)
	if err == nil {
		if err = l.fold(ctx, nil); err != nil {
			l.mu.Unlock()
		}
	}
	if err != nil {
		l.reports.Unlock()
		l.claims.Unlock()
	}
	return err
}

// unlockLeading lets go of what lockLeading took.
func (l *Leader) unlockLeading() {
	l.mu.Unlock()
	l.reports.Unlock()
	l.claims.Unlock()
}

// lockLed takes the lock while this coordinator leads (ErrNotLeading
// otherwise, and nothing is locked), without reading the tail: for a
// claim or a batch of reports, called with its lane. Every row of the
// leader's but those of the other lane is folded already (each append
// folds its own before its lanes are let go), and what else may be
// unread is submissions: a report does not depend on them (a submission
// never changes a held job), and a claim that misses the newest takes
// them at the next one (the catch-up that folds them says jobs are
// claimable, which wakes the waiting requests). A round trip under the
// lock less for each. After an append that failed (unsure), it folds
// first: that append may have committed.
func (l *Leader) lockLed(ctx context.Context) error {
	if !l.Reachable() {
		return ErrUnreachable
	}
	l.mu.Lock()
	if !l.leading || l.state == nil {
		l.mu.Unlock()
		return ErrNotLeading
	}
	if !l.Reachable() { // found so by the call it waited behind (a fold that got no answer)
		l.mu.Unlock()
		return ErrUnreachable
	}
	if l.unsure {
		if err := l.fold(ctx, nil); err != nil {
			l.mu.Unlock()
			l.Observe(err)
			return err
		}
	}
	return nil
}

// appendBatches appends batches as the partition's leader, a row each,
// in one transaction fenced by its epoch, with the records of the jobs
// they end (record.go); learning that another leads (ErrFenced), it leads
// no more. It returns the read of the tail queued after the commit, for
// the fold that follows. Called with l.mu held and both lanes, while
// leading, the state folded.
func (l *Leader) appendBatches(ctx context.Context, batches []batch) (*TailRead, error) {
	return l.append(ctx, batches, false)
}

// appendLaned is appendBatches for a claim or a batch of reports, called
// with l.mu held and the append's own lane: it lets go of l.mu over the
// round trip (the lanes keep the order of what must be ordered), and
// takes it again before it returns.
func (l *Leader) appendLaned(ctx context.Context, batches []batch) (*TailRead, error) {
	return l.append(ctx, batches, true)
}

func (l *Leader) append(ctx context.Context, batches []batch, unlock bool) (read *TailRead, err error) {
	ctx, cancel := bounded(ctx, l.cfg.CallTimeout)
	defer cancel()
	if !unlock {
		defer l.callLocked()()
	}
	// What the records need of the state is read under the lock; the
	// rows' bodies and the records' arguments are made without it.
	var ends []ended
	var submitted map[int64]submittedRow
	if slices.ContainsFunc(batches, func(b batch) bool {
		return slices.ContainsFunc(b.items, func(it Item) bool { return mayEnd(b.kind, it) })
	}) {
		if ends, err = l.state.endedBy(batches); err != nil {
			return nil, err
		}
		if len(ends) > 0 {
			if submitted, err = l.submissions(ctx, ends); err != nil {
				err = answered(ctx, err)
				l.Observe(err)
				return nil, err
			}
		}
	}
	// The tail is read in the same round trip, after the commit: the
	// fold that follows every append starts with it (Leader.fold), unless
	// another fold moved the tail meanwhile.
	queue, epoch := l.tail.QueueLater(), l.lease.Epoch
	if unlock {
		l.mu.Unlock()
	}
	read, n, err := l.send(ctx, epoch, batches, ends, submitted, queue)
	err = answered(ctx, err)
	if unlock {
		l.mu.Lock()
	}
	if err == nil && l.cfg.Publish != nil {
		l.wakeToPublish() // their events go at the next catch-up, at once
	}
	switch {
	case errors.Is(err, ErrFenced):
		l.refused(n)
	case err != nil:
		l.unsure = true
		l.Observe(err)
	}
	return read, err
}

// refused is what the leader does when an append of its rows was refused
// (ErrFenced: another took the lease): it leads no more, and says so (the
// fault suite's freeze scenario waits for these words). Called with l.mu
// held.
func (l *Leader) refused(rows int) {
	l.leading = false
	l.cfg.Logger.Info("another coordinator leads journal partition now: an append was refused", "rows", rows)
}

// send appends batches (a row each) with epoch and the records of ends,
// in one round trip that queues the tail's read after the commit; it
// returns that read and how many rows it appended. It touches neither the
// state nor the tail: what it needs of them was read before.
func (l *Leader) send(ctx context.Context, epoch int64, batches []batch, ends []ended, submitted map[int64]submittedRow,
	queue func(*pgx.Batch) *TailRead) (*TailRead, int, error) {
	rows := make([]Rows, 0, len(batches))
	for _, b := range batches {
		if len(b.items) == 0 {
			continue
		}
		body, err := Encode(b.items)
		if err != nil {
			return nil, 0, err
		}
		rows = append(rows, Rows{Kind: b.kind, Bodies: [][]byte{body}})
	}
	var records [][]any // recordsSQL's arguments, a batch of records each
	now := l.Now().UnixMicro()
	for _, same := range byOutcome(ends) {
		for chunk := range slices.Chunk(same, recordsPerBatch) {
			args, err := recordsArgs(l.cfg.Partition, epoch, chunk, submitted, now)
			if err != nil {
				return nil, 0, err
			}
			records = append(records, args)
		}
	}
	groups, ids := retriedRefs(batches)
	var also func(*pgx.Batch)
	if len(records) > 0 || len(ids) > 0 {
		also = func(b *pgx.Batch) {
			for _, args := range records {
				b.Queue(recordsSQL, args...)
			}
			if len(ids) > 0 {
				// Jobs retried by hand leave their records, in the
				// transaction that makes them live again: a job has one
				// record at most.
				b.Queue(RecordsLockSQL)
				b.Queue(forgetRecordsSQL, l.cfg.Partition, epoch, groups, ids)
			}
		}
	}
	var read *TailRead
	then := func(b *pgx.Batch) { read = queue(b) }
	err := appendFencedRowsThen(ctx, l.db, l.cfg.Partition, epoch, 0, rows, also, then)
	return read, len(rows), err
}

// expireBatch is how many jobs one expired row fails at most.
const expireBatch = 1000

// expire fails the jobs whose expiry passed and that no executor holds,
// by expired rows (with their records), and releases the pending jobs
// whose time to release themselves came, by release rows, a batch at a
// time. Called with l.mu held, while leading, the state folded.
func (l *Leader) expire(ctx context.Context) error {
	if err := l.timed(ctx, Expired, l.queues.Expired); err != nil {
		return err
	}
	return l.timed(ctx, Release, l.queues.Triggered)
}

// timed appends rows of kind for the jobs due pops, a batch at a time.
func (l *Leader) timed(ctx context.Context, kind Kind, due func(now int64, limit int) []fairway.JobRef) error {
	for {
		refs := due(l.Now().UnixMicro(), expireBatch)
		if len(refs) == 0 {
			return nil
		}
		items := make([]Item, len(refs))
		for i, ref := range refs {
			items[i] = Item{Group: ref.Group, ID: ref.ID}
		}
		read, err := l.appendBatches(ctx, []batch{{kind: kind, items: items}})
		if err != nil {
			if !errors.Is(err, ErrFenced) {
				// Tried again at the next catch-up: they are indexed anew.
				now := l.Now().UnixMicro()
				for _, ref := range refs {
					l.queues.Update(ref, now)
				}
			}
			return err
		}
		if err := l.fold(ctx, read); err != nil {
			return err
		}
	}
}

// readFinals reads the final states of group's jobs ids from their
// records (the leader writes them at each job's end: record.go).
func (l *Leader) readFinals(ctx context.Context, group string, ids []string) (map[string]fairway.State, error) {
	rows, err := l.db.Query(ctx, `SELECT id, state FROM fairway_records_of($1, $2)`, group, ids)
	if err != nil {
		return nil, err
	}
	out := map[string]fairway.State{}
	var id string
	var st fairway.State
	_, err = pgx.ForEachRow(rows, []any{&id, &st}, func() error { out[id] = st; return nil })
	return out, err
}

// stateUnknown is the final state of a dependency that has no record.
const stateUnknown fairway.State = "unknown"

// records reads the final states of the dependencies owed whose end the
// fold did not see (Records, or the leader's own records in fairway_record);
// one that has no record is stateUnknown.
func (l *Leader) records(ctx context.Context) (map[fairway.JobRef]fairway.State, error) {
	byGroup := map[string][]string{}
	for _, r := range l.resolve {
		if r.final == "" {
			byGroup[r.dependency.Group] = append(byGroup[r.dependency.Group], r.dependency.ID)
		}
	}
	out := map[fairway.JobRef]fairway.State{}
	if len(byGroup) == 0 {
		return out, nil
	}
	read := l.cfg.Records
	if read == nil {
		read = l.readFinals
	}
	for g, ids := range byGroup {
		finals, err := read(ctx, g, ids)
		if err != nil {
			return nil, fmt.Errorf("reading the records of the dependencies of group %s: %w", g, err)
		}
		for _, id := range ids {
			out[fairway.JobRef{Group: g, ID: id}] = cmp.Or(finals[id], stateUnknown)
		}
	}
	return out, nil
}

// drop stops leading (the lease runs out by itself).
func (l *Leader) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leading = false
}
