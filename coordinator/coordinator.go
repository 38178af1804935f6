// Package coordinator ingests submissions into PostgreSQL, hands jobs to
// executors fairly, applies their reports, recovers jobs whose executor was
// lost, and publishes every committed state change as an event.
//
// Coordinators are all equal: run as many as you like against the same
// PostgreSQL and NATS. They share work through JetStream durable consumers
// and NATS queue groups, and share the fairness state through PostgreSQL.
package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	istore "github.com/fairwayhq/fairway/internal/store"
	"github.com/fairwayhq/fairway/internal/storeaccess"
	"github.com/fairwayhq/fairway/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of Config.
const (
	RetriesDefault          = 5
	RetryDelayDefault       = time.Minute
	LeaseDefault            = 30 * time.Second
	IngestBatchDefault      = 500
	HeartbeatTimeoutDefault = 15 * time.Second
	APIWorkersDefault       = 16
	APIGroupWorkersDefault  = 1
	APIQueueDefault         = 1024
	APIRateDefault          = 100
	DeadLetterAfterDefault  = 5
	queueGroup              = "fairway-coordinators"
)

// The values of Config.Fairness.
const (
	// FairnessJobs: each turn is one job.
	FairnessJobs = istore.FairnessJobs
	// FairnessTime: each group gets its weighted share of slot-time.
	FairnessTime = istore.FairnessTime
)

// Config configures a Coordinator.
type Config struct {
	// Prefix is the subject prefix. Defaults to "fairway".
	Prefix string
	// Scheme is the counting scheme. Defaults to 4,1.
	Scheme fairway.CountingScheme
	// Fairness is what a group's turn is worth (FairnessJobs, the
	// default, or FairnessTime): see docs/architecture.md, "Fair
	// shares". Set the same on every coordinator.
	Fairness string
	// Retries is the max_retries of jobs submitted without one. Defaults to 5.
	Retries *int
	// RetryDelay is the delay before the first retry; it doubles with each
	// further one. Defaults to 1 minute.
	RetryDelay time.Duration
	// Lease is how long a job handed to an executor stays its own without a
	// heartbeat. Defaults to 30 seconds.
	Lease time.Duration
	// MaxArgsSize caps a job's args. Defaults to 1 MiB.
	MaxArgsSize int64
	// IngestBatch caps the submissions stored in one transaction. Defaults
	// to 500.
	IngestBatch int
	// HeartbeatTimeout is how long an executor may stay silent before another
	// executor may take over its app-id. Defaults to 15 seconds.
	HeartbeatTimeout time.Duration
	// APIWorkers is how many API requests the coordinator answers at once.
	// Defaults to 16.
	APIWorkers int
	// APIGroupWorkers is how many of them one group runs at once: its
	// other requests wait their turn, and other groups' are answered
	// meanwhile. Defaults to 1 (BenchmarkAPIListFlood: a group that floods
	// large lists on 4 workers made others wait 40 times longer than on 1).
	APIGroupWorkers int
	// APIQueue caps the API requests waiting for a worker; one group may
	// have an eighth of them waiting (at least 1). A request beyond is
	// refused at once: unavailable when the queue is full, quota when its
	// group has its share waiting. Defaults to 1024.
	APIQueue int
	// APIRate is each group's quota of API requests per second on this
	// coordinator (a token bucket); a request over it is refused with
	// quota. Negative: unlimited. The operator API has no quota. Defaults
	// to 100.
	APIRate float64
	// APIBurst is how many API requests a group may send at once above
	// APIRate. Defaults to twice APIRate.
	APIBurst int
	// EventPerMessage publishes each event in a message of its own (a JSON
	// object), for subscribers that read the events stream raw and expect
	// that. By default events go in batches: one message per subject (group,
	// task, state) and publishing round, a JSON array, which costs a
	// fraction per event (docs/nats-api.md). events.Client reads both.
	EventPerMessage bool
	// StreamOptions tunes the JetStream streams.
	StreamOptions events.StreamOptions
	// QuotaJobs caps each group's unfinished jobs (pending, waiting, stuck,
	// and those executors hold: the partition's state counts them all): a
	// submission beyond it is refused with code quota. Defaults to 100,000;
	// negative is unlimited.
	QuotaJobs int
	// QuotaSubmitRate caps each group's submissions per second through
	// this coordinator (a token bucket of QuotaSubmitBurst). Over it, a
	// group's submissions wait in NATS and are stored later, in order,
	// and a request/reply submission waits up to its deadline: none is
	// refused for the rate. Defaults to 1,000; negative is unlimited.
	QuotaSubmitRate float64
	// QuotaSubmitBurst is the size of that bucket. Defaults to 5,000.
	QuotaSubmitBurst int
	// QuotaSubmitBytesRate caps each group's bytes of submissions per
	// second through this coordinator, as QuotaSubmitRate caps their
	// number (a token bucket of QuotaSubmitBytesBurst bytes), so that a
	// group sending few, large submissions keeps a pace too. Defaults to
	// 16 MiB/s; negative is unlimited.
	QuotaSubmitBytesRate float64
	// QuotaSubmitBytesBurst is the size of that bucket, in bytes.
	// Defaults to 64 MiB.
	QuotaSubmitBytesBurst int
	// DeadLetterAfter is how many deliveries a submission or report that
	// PostgreSQL refuses gets before it goes to the dead-letter stream.
	// Defaults to 5.
	DeadLetterAfter int
	// Logger receives the coordinator's logs. Defaults to discard.
	Logger *slog.Logger
	// Metrics, when set, is where the coordinator registers its
	// Prometheus metrics (see metrics.go and README "Metrics").
	Metrics prometheus.Registerer
	// Tracer is where the coordinator's spans go (see tracing.go and
	// docs/tracing.md): one trace per job, carried in NATS headers and
	// stored with the job. The trace context that submitters send is
	// stored and handed on whatever the provider, a no-op one included.
	// Defaults to otel.GetTracerProvider(), the global provider: a no-op
	// unless the program set one.
	Tracer trace.TracerProvider
	// Clock, when set, replaces PostgreSQL's clock as the time periodic
	// tasks follow (tests set it to control time). By default they follow
	// PostgreSQL's now(), read when needed, so a coordinator whose host
	// clock is wrong still fires them on time.
	Clock func() time.Time
	// Retention is how long finished jobs are kept, by final state.
	Retention Retention
	// JournalLeaseTTL is how long a partition's lease lasts unrenewed
	// (renewed every third of it): how long a leader that died holds its
	// partitions. 0: 1.5 s. Longer only where a database may hold its
	// commits longer than that while this coordinator must stay its
	// leader (tests that hold them).
	JournalLeaseTTL time.Duration
	// PartitionStores are the databases of the cluster's partitions, by
	// number: their count is the cluster's partitions (fixed when it was
	// created: istore.CheckLayout), and several may be the same store.
	// Empty: one partition, in the store New is given. The store New is
	// given is the cluster's home in any case: executors, periodic tasks,
	// limits and the maintenance lead live there.
	PartitionStores []*store.Store
	// HostClock, when set, replaces time.Now as this coordinator's host
	// clock (the fault suite skews it). The journal's leader reads it only
	// until its first renewal of the lease: what decides when a job is
	// due, expired or held too long follows PostgreSQL's clock
	// (journal.Leader.Now); periodic tasks follow PostgreSQL's now()
	// (Clock); durations use the monotonic clock.
	HostClock func() time.Time
}

func (c Config) withDefaults() Config {
	c.Fairness = cmp.Or(c.Fairness, istore.FairnessJobs)
	if c.Scheme == (fairway.CountingScheme{}) {
		c.Scheme = fairway.CountingScheme{High: 4, Low: 1}
	}
	if c.Retries == nil {
		r := RetriesDefault
		c.Retries = &r
	}
	c.RetryDelay = cmp.Or(c.RetryDelay, RetryDelayDefault)
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	c.MaxArgsSize = cmp.Or(c.MaxArgsSize, fairway.DefaultMaxArgsSize)
	c.IngestBatch = cmp.Or(c.IngestBatch, IngestBatchDefault)
	c.HeartbeatTimeout = cmp.Or(c.HeartbeatTimeout, HeartbeatTimeoutDefault)
	c.APIWorkers = cmp.Or(c.APIWorkers, APIWorkersDefault)
	c.APIGroupWorkers = cmp.Or(c.APIGroupWorkers, APIGroupWorkersDefault)
	c.APIQueue = cmp.Or(c.APIQueue, APIQueueDefault)
	c.APIRate = cmp.Or(c.APIRate, APIRateDefault)
	c.APIBurst = cmp.Or(c.APIBurst, int(math.Ceil(2*c.APIRate)))
	c.QuotaJobs = cmp.Or(c.QuotaJobs, QuotaJobsDefault)
	c.QuotaSubmitRate = cmp.Or(c.QuotaSubmitRate, QuotaSubmitRateDefault)
	c.QuotaSubmitBurst = cmp.Or(c.QuotaSubmitBurst, QuotaSubmitBurstDefault)
	c.QuotaSubmitBytesRate = cmp.Or(c.QuotaSubmitBytesRate, QuotaSubmitBytesRateDefault)
	c.QuotaSubmitBytesBurst = cmp.Or(c.QuotaSubmitBytesBurst, QuotaSubmitBytesBurstDefault)
	c.DeadLetterAfter = cmp.Or(c.DeadLetterAfter, DeadLetterAfterDefault)
	c.Retention = c.Retention.withDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Tracer == nil {
		c.Tracer = otel.GetTracerProvider()
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Fairness != istore.FairnessJobs && c.Fairness != istore.FairnessTime {
		errs = append(errs, fmt.Errorf("fairness %q: must be %q or %q", c.Fairness, istore.FairnessJobs, istore.FairnessTime))
	}
	if c.Scheme.High < 0 || c.Scheme.Low < 0 || c.Scheme.High+c.Scheme.Low == 0 {
		errs = append(errs, fmt.Errorf("counting-scheme %d,%d: both must be ≥ 0 and not both 0", c.Scheme.High, c.Scheme.Low))
	}
	if *c.Retries < 0 || *c.Retries > fairway.MaxRetriesLimit {
		errs = append(errs, fmt.Errorf("retries %d: must be in 0..%d", *c.Retries, fairway.MaxRetriesLimit))
	}
	if c.RetryDelay < 0 {
		errs = append(errs, fmt.Errorf("retry-delay %s: must be positive", c.RetryDelay))
	}
	if c.Lease < time.Second {
		errs = append(errs, fmt.Errorf("lease %s: must be at least 1s", c.Lease))
	}
	if c.JournalLeaseTTL != 0 && c.JournalLeaseTTL < 300*time.Millisecond {
		errs = append(errs, fmt.Errorf("journal lease TTL %s: must be 0 (1.5s) or at least 300ms", c.JournalLeaseTTL))
	}
	if err := c.Retention.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.IngestBatch < 1 || c.IngestBatch > 10000 {
		errs = append(errs, fmt.Errorf("ingest-batch %d: must be in 1..10000", c.IngestBatch))
	}
	if c.APIWorkers < 1 || c.APIWorkers > 1024 {
		errs = append(errs, fmt.Errorf("api-workers %d: must be in 1..1024", c.APIWorkers))
	}
	if c.APIGroupWorkers < 1 || c.APIGroupWorkers > c.APIWorkers {
		errs = append(errs, fmt.Errorf("api-group-workers %d: must be in 1..api-workers (%d)", c.APIGroupWorkers, c.APIWorkers))
	}
	if c.APIQueue < 1 {
		errs = append(errs, fmt.Errorf("api-queue %d: must be at least 1", c.APIQueue))
	}
	if c.APIRate > 0 && c.APIBurst < 1 {
		errs = append(errs, fmt.Errorf("api-burst %d: must be at least 1", c.APIBurst))
	}
	return errors.Join(errs...)
}

// Coordinator is one coordinator process's worth of services.
type Coordinator struct {
	cfg      Config
	store    *istore.Store
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects events.Subjects
	log      *slog.Logger

	id      string     // names this coordinator in periodic task marks
	tasks   *taskCache // the tasks some executor runs (the dispatcher refreshes it)
	apiRate *rateLimiter
	apiHook atomic.Pointer[func(group, verb string)] // tests: runs before each API request
	quotas  *quotas
	// resultStreams are the executors whose own results stream this
	// coordinator made or found (ownResults).
	resultStreams sync.Map
	metrics       *coordMetrics
	tracer        trace.Tracer
	dead          *deadLetters // what becomes of messages not applied (ingest, results)

	// The services, each with its goroutine (Start starts them). Ingest,
	// the dispatcher, the results, the events relay and the due timers
	// run on every coordinator, as does the resolution of dependents (its
	// sweep of blocked jobs only on the leader); the lease sweeper, the
	// periodic firer and the pruner run on the coordinator that leads the
	// maintenance only: the leadership starts and stops them
	// (leaderServices).
	ingest     *ingest        // stores the submissions of the submit stream
	dispatcher *dispatcher    // the executor protocol: dispatch, long polls, registrations, heartbeats
	results    *results       // applies the executors' reports
	relay      *relay         // the outbox → JetStream publisher
	waits      *waits         // the wait requests held until their jobs end
	rejections *rejections    // the recent rejections, for waits that come after them
	lead       *leadership    // the maintenance leader election
	sweeper    *leaseSweeper  // lease expiry, timed releases, gone executors
	periodic   *periodicFirer // fires the periodic tasks
	pruner     *pruner        // retention
	parts      partitions     // the hot path: each partition's leader holds its unfinished jobs
	leaderAPI  *leaderOnly    // the API requests followers forward to the leader
	clead      *clusterLead   // which coordinator leads the cluster
	peers      *peers         // notices another coordinator gone, for what it held

	mu        sync.Mutex
	cancel    context.CancelFunc
	subs      *subscriptions // the API's, the executor protocol's, the notifications
	consumers *consumers     // ingest's and the results'
	wg        sync.WaitGroup
}

// New returns a coordinator on the database of pub; Start runs it.
func New(pub *store.Store, nc *nats.Conn, cfg Config) (*Coordinator, error) {
	st := storeaccess.Engine(pub)
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("coordinator config: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	c := &Coordinator{
		cfg: cfg, store: st, nc: nc, js: js,
		subjects: events.NewSubjects(cfg.Prefix),
		log:      cfg.Logger,
		id:       coordinatorID(),
		tasks:    &taskCache{store: st, log: cfg.Logger},
		apiRate:  newRateLimiter(cfg.APIRate, cfg.APIBurst),
		metrics:  newMetrics(cfg.Metrics, st, cfg.Logger),
		tracer:   cfg.Tracer.Tracer(TracerName),
		subs:     &subscriptions{nc: nc},
	}
	c.consumers = &consumers{js: js, nc: nc, goLoop: c.goLoop}
	c.quotas = newQuotas(cfg.QuotaJobs, cfg.QuotaSubmitRate, cfg.QuotaSubmitBurst, cfg.QuotaSubmitBytesRate, cfg.QuotaSubmitBytesBurst, c.metrics.quotaRefused)
	c.dead = &deadLetters{after: cfg.DeadLetterAfter, subjects: c.subjects, nc: nc, js: js, log: c.log, metrics: c.metrics, retryLog: newLogLimit(2)}
	// What every service is built on (serviceBase).
	base := serviceBase{store: st, log: c.log, metrics: c.metrics, tracer: c.tracer, nc: nc, js: js, subjects: c.subjects}
	c.relay = newRelay(relayConfig{PerMessage: cfg.EventPerMessage}, base, c.dead)
	c.waits = newWaits(c)
	c.rejections = newRejections()
	c.dispatcher = newDispatcher(dispatchConfig{Lease: cfg.Lease, Scheme: cfg.Scheme, Fairness: cfg.Fairness, HeartbeatTimeout: cfg.HeartbeatTimeout},
		base, c.tasks, c.respond, c.replyError)
	c.dispatcher.ownResults = c.ownResults
	c.results = newResults(resultsConfig{}, base, c.dead)
	c.lead = &leadership{store: st, holder: fairway.NewID(), log: c.log}
	c.sweeper = newLeaseSweeper(sweepConfig{Lease: cfg.Lease}, base, c.lead.answeringSince)
	c.periodic = newPeriodicFirer(periodicConfig{Retries: *cfg.Retries}, base, c.id, c.periodicNow, c.relay.kick)
	c.pruner = newPruner(pruneConfig{Retention: cfg.Retention}, base)
	// The leader-only services: started when this coordinator gains the
	// maintenance lead, stopped when it loses it.
	c.lead.services = &leaderServices{loops: []func(context.Context){c.sweeper.run, c.periodic.run, c.pruner.run}}
	c.ingest = newIngest(ingestConfig{Batch: cfg.IngestBatch, MaxArgsSize: cfg.MaxArgsSize, Retries: *cfg.Retries, Rate: cfg.QuotaSubmitRate},
		base, c.dead, c.quotas, c.tasks, c.dispatcher.parking, c.dispatcher.handedOver, c.relay.kick)
	c.onJournal()
	c.peers = &peers{nc: nc, subject: c.subjects.CoordinatorBeat(), holder: c.lead.holder, gone: func() {
		c.log.Info("a coordinator is gone (not heard for 3 s): sweeping the streams for what it held")
		c.sweepAfter(afterPeerGone)
	}}
	return c, nil
}

// sweepAfter has ingest and the results sweep their streams, d from now,
// for what a coordinator that died or stopped held (streamSources.sweepAfter).
func (c *Coordinator) sweepAfter(d time.Duration) {
	for _, s := range []*atomic.Pointer[streamSources]{&c.ingest.sources, &c.results.sources} {
		if s := s.Load(); s != nil {
			s.sweepAfter(d)
		}
	}
}

// afterPeerGone is how long after a peer is found gone the streams are
// swept: its last beat came at most peerBeat before it died and was found
// peerGone after it at least, and what it held comes back ackWait after
// its death at most.
const afterPeerGone = ackWait - peerGone + peerBeat + 500*time.Millisecond

// onJournal puts the services on the journal engines, one a partition:
// the hot path goes through the partitions' leader (journalEngine), and
// the API requests that need the unfinished jobs are forwarded to it.
func (c *Coordinator) onJournal() {
	c.leaderAPI = &leaderOnly{nc: c.nc, log: c.log, subject: c.subjects.ToLeaderAll(), what: "forwarded API requests"}
	c.clead = &clusterLead{js: c.js, bucket: c.subjects.LeadBucket(), holder: c.lead.holder, replicas: max(c.cfg.StreamOptions.Replicas, 1), log: c.log,
		alive: func(holder string) bool { return c.peers.alive(holder) }}
	// The dispatch requests and the API requests the others forward are
	// served while this coordinator routes (Coordinator.routes): it leads
	// the cluster and a partition. Served as it came to lead the cluster,
	// before any partition, a request it forwarded to itself waited in
	// its lane behind the request that forwarded it, until its deadline
	// (the bench's drain with limits, 1 run in 5).
	serve := func() {
		on := c.routes()
		c.dispatcher.serveDispatch(on)
		c.leaderAPI.serve(on)
	}
	c.clead.changed = func(on bool) {
		if on {
			c.metrics.clusterLeader.Set(1)
			// What a predecessor was handed comes back after ackWait.
			c.sweepAfter(afterTakeOver)
		} else {
			c.metrics.clusterLeader.Set(0)
		}
		serve()
		// The partitions take their leases, or give them up, now rather
		// than at their next renewal (half a second: every job of theirs
		// waited as long at a start).
		for _, e := range c.parts {
			e.leader.Contend()
		}
	}
	stores := []*istore.Store{c.store}
	if len(c.cfg.PartitionStores) > 0 {
		stores = stores[:0]
		for _, st := range c.cfg.PartitionStores {
			stores = append(stores, storeaccess.Engine(st))
		}
	}
	c.parts = make(partitions, len(stores))
	for p, st := range stores {
		cfg := journalEngineConfig{Partition: int16(p), Holder: c.lead.holder, Fairness: c.cfg.Fairness, Scheme: c.cfg.Scheme, RetryDelay: c.cfg.RetryDelay, Clock: c.cfg.HostClock, //nolint:gosec // G115: at most partition.Max
			TTL: c.cfg.JournalLeaseTTL, Renew: c.cfg.JournalLeaseTTL / 3}
		for q, other := range stores {
			cfg.Shared = cfg.Shared || (q != p && other == st)
		}
		// Led by the cluster's leader, which serves the requests: a
		// partition's coming to lead makes its jobs claimable (the parked
		// requests are served again) and its reports applicable.
		cfg.Balance = followCluster{lead: c.clead}
		leading := func(on bool) {
			serve()
			if on {
				c.dispatcher.notifyWork()
			}
		}
		e := newJournalEngine(st, c.store, cfg, c.log.With("partition", p), c.publishEvents, c.dispatcher.notifyWork, leading)
		e.stopping = c.dispatcher.parking.stopping.has
		c.parts[p] = e
	}
	c.dispatcher.cluster = newClusterLimits(c.parts, c.dispatcher.parking.signal)
	for _, e := range c.parts {
		e.cluster = c.dispatcher.cluster
	}
	c.dispatcher.parts, c.results.parts, c.sweeper.parts, c.quotas.parts = c.parts, c.parts, c.parts, c.parts
	c.periodic.parts, c.ingest.parts, c.pruner.parts = c.parts, c.parts, c.parts
	c.results.routes, c.ingest.routes = c.routes, c.routes
	c.lead.eligible = c.routes
	c.metrics.queues.mu.Lock() // scraped from New on
	c.metrics.queues.parts = c.parts
	c.metrics.queues.mu.Unlock()
}

// startRestoreWait bounds how long Start waits for the journal's state.
const startRestoreWait = 30 * time.Second

// Start creates the streams and consumers and starts the services. It
// returns once they run; they stop with Stop or when ctx ends. On the
// journal engine it returns once the partition's state is restored
// (startRestoreWait at most).
func (c *Coordinator) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		return errors.New("coordinator already started")
	}
	// A submission may be max-args-size plus 64 KiB for its other fields:
	// args that cannot fit in a message at all are a configuration error;
	// args that fit without the rest only limit what a client can send.
	if need := c.cfg.MaxArgsSize + 64<<10; c.cfg.MaxArgsSize > c.nc.MaxPayload() {
		return fmt.Errorf("coordinator.max-args-size %d bytes does not fit in the NATS server's max_payload of %d bytes: set max_payload to at least %d in the NATS server's configuration (e.g. max_payload: 8MB), or lower coordinator.max-args-size",
			c.cfg.MaxArgsSize, c.nc.MaxPayload(), need)
	} else if need > c.nc.MaxPayload() {
		c.log.Warn("a submission with args of coordinator.max-args-size would not fit in the NATS server's max_payload; set max_payload to at least the size needed (e.g. max_payload: 8MB)",
			"max_args_size", c.cfg.MaxArgsSize, "max_payload", c.nc.MaxPayload(), "needed", need)
	}
	// A database of the row engine, which this version no longer runs, is
	// refused until it is moved onto the journal.
	if err := c.store.OpenJournal(ctx); err != nil {
		return err
	}
	// Where the partitions are, checked against what the databases
	// recorded, and recorded (a new cluster's count, fixed from now on).
	if _, err := istore.RecordLayout(ctx, c.store, c.parts.databases()); err != nil {
		return err
	}
	for _, st := range c.parts.stores() {
		if st != c.store {
			if err := st.OpenJournal(ctx); err != nil {
				return err
			}
		}
	}
	if err := c.ensureStreams(ctx); err != nil {
		return err
	}
	if err := c.tasks.refresh(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	go func() {
		select {
		case <-ctx.Done():
			c.Stop()
		case <-runCtx.Done():
		}
	}()
	steps := []func(context.Context) error{
		c.startAPI,
		func(ctx context.Context) error { return c.dispatcher.start(ctx, c.subs, c.goLoop) },
		// Every coordinator hears that a periodic task changed: the one
		// that leads the maintenance fires it when it is due.
		func(context.Context) error {
			return c.subs.listen(c.subjects.NotifyPeriodic(), func(*nats.Msg) { c.periodic.kick() })
		},
		// Every coordinator hears every rejection: for the waits held,
		// and those that come after it (rejections.go).
		func(context.Context) error {
			return c.subs.listen(c.subjects.EventFilter("", "", fairway.StateRejected), func(msg *nats.Msg) {
				evs, err := events.DecodeEvents(msg.Data)
				if err != nil {
					return
				}
				c.rejections.record(evs)
				c.waits.answerEvents(evs)
			})
		},
		func(ctx context.Context) error { return c.ingest.start(ctx, c.subs, c.consumers) },
		func(ctx context.Context) error { return c.results.start(ctx, c.subs, c.consumers) },
		func(ctx context.Context) error { return c.peers.start(ctx, c.subs, c.goLoop) },
	}
	for _, step := range steps {
		if err := step(runCtx); err != nil {
			c.stopLocked()
			return err
		}
	}
	c.clead.try(runCtx) // a coordinator alone leads from its start
	c.goLoop(runCtx, c.clead.run)
	for _, e := range c.parts {
		c.goLoop(runCtx, e.run)
	}
	// Started means ready: the partitions' states restored (2.6 s for
	// 1,000,000 waiting jobs) and, on the leader, dispatch answered.
	// Before that an executor's request finds no responder.
	wait := time.NewTimer(startRestoreWait)
restoring:
	for _, e := range c.parts {
		select {
		case <-e.leader.Restored():
		case <-ctx.Done():
			break restoring
		case <-wait.C:
			c.log.Warn("the journal's state is not restored yet; starting anyway (reads and dispatch wait for it)", "waited", startRestoreWait.String(), "partition", e.partition)
			break restoring
		}
	}
	wait.Stop()
	c.lead.try(runCtx) // a coordinator alone leads from its start
	c.goLoop(runCtx, c.lead.run)
	c.goLoop(runCtx, c.relay.run)
	c.goLoop(runCtx, c.dispatcher.parkLoop)
	// Jobs stored in callers' transactions (store.InsertTx): the leader
	// reads them from the journal's tail after the commit, not at the
	// next poll.
	for _, st := range c.parts.stores() {
		c.goLoop(runCtx, func(ctx context.Context) {
			st.ListenJobs(ctx, func() {
				for _, e := range c.parts {
					if e.store == st {
						e.leader.Wake()
					}
				}
				c.relay.kick()
				c.dispatcher.notifyWork()
			})
		})
	}
	if err := c.periodic.clearDeadMarks(ctx); err != nil {
		c.log.Warn("clearing the periodic task marks of coordinators that are gone; they clear when stale", "error", err)
	}
	c.periodic.kick()
	c.relay.kick()
	c.dispatcher.notifyWork()
	c.log.Info("coordinator started", "prefix", c.cfg.Prefix, "counting_scheme", fmt.Sprintf("%d,%d", c.cfg.Scheme.High, c.cfg.Scheme.Low),
		"retries", *c.cfg.Retries, "retry_delay", c.cfg.RetryDelay.String(), "lease", c.cfg.Lease.String())
	return nil
}

// ensureStreams creates or updates the streams, waiting for JetStream while
// it is not ready (a cluster still electing its meta leader, a server
// restarting) until ctx ends.
func (c *Coordinator) ensureStreams(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := events.EnsureStreams(ctx, c.js, c.subjects, c.cfg.StreamOptions)
		if err == nil || events.IsStreamConfigRefused(err) || ctx.Err() != nil {
			return err
		}
		wait := min(time.Duration(attempt)*time.Second, 5*time.Second)
		c.log.Warn("JetStream not ready; trying again", "error", err, "attempt", attempt, "retry_in", wait.String())
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// ownResults makes sure that executor appID has its own results stream
// (events.EnsureExecutorResultStream), once per app-id and coordinator.
func (c *Coordinator) ownResults(ctx context.Context, appID string) error {
	if _, ok := c.resultStreams.Load(appID); ok {
		return nil
	}
	if err := events.EnsureExecutorResultStream(ctx, c.js, c.subjects, appID, c.cfg.StreamOptions); err != nil {
		return err
	}
	c.resultStreams.Store(appID, true)
	return nil
}

func (c *Coordinator) goLoop(ctx context.Context, loop func(context.Context)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		loop(ctx)
	}()
}

// Stop stops taking requests and messages and waits for the work in hand to
// finish. Safe to call twice.
func (c *Coordinator) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopLocked()
}

func (c *Coordinator) stopLocked() {
	if c.cancel == nil {
		return
	}
	c.subs.drain()
	c.consumers.drain()
	// The journal's leases to a follower now, not once they run out,
	// then the cluster's lead, so that the coordinator that takes it
	// finds them free (followCluster).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	c.clead.stopLeading()
	for _, e := range slices.Backward(c.parts) {
		if err := e.leader.Resign(ctx); err != nil {
			c.log.Warn("giving the journal's lease up; a follower takes it once it runs out", "partition", e.partition, "error", err)
		}
	}
	c.clead.release(ctx)
	cancel()
	c.cancel()
	c.wg.Wait()
	c.waits.stop()
	c.log.Info("coordinator stopped")
}

// coordinatorID names a coordinator process: host, pid and a random part.
func coordinatorID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), fairway.NewID()[24:])
}
