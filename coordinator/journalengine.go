package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// journalEngine runs the hot path on the journal: ingest
// appends submitted rows (journal.Submit), dispatch claims from the
// partition leader's memory (journal.Leader.Claim), the executors'
// reports are appended by the leader (Leader.Report), which writes each
// job's record at its end and publishes the events of every row it folds
// (the journal is their outbox). Every coordinator follows the partition
// (Leader.Run); the one that holds its lease leads.
//
// Dependencies and trackers run on it (the leader resolves the one and
// the fold refuses a tracker held by a live job), and so do the API's
// reads and changes of single jobs (journalapi.go: every coordinator
// reads, the leader changes), the quotas of queued jobs (the state's
// counts), the concurrency limits, rate limits and weights
// (journallimits.go), periodic tasks, job logs (journallogs.go) and
// graphs (journalgraph.go): the whole API (docs/journal.md, "The
// coordinator on the journal"). store.InsertTx appends to the journal in
// the caller's transaction.
type journalEngine struct {
	partition int16
	leader    *journal.Leader
	db        *pgxpool.Pool
	store     *store.Store // the partition's database: its journal, records and job logs
	// home is the cluster's home database: the executors' registry and
	// the limits (the partition's own database, or another).
	home       *store.Store
	retryDelay time.Duration
	// scheme is the claims' counting scheme, for a hand-over's picks.
	scheme fairway.CountingScheme
	log    *slog.Logger
	// leads says whether this coordinator leads the partition (told by
	// the leader: LeaderConfig.Leading). Only the leader answers dispatch
	// requests (serveDispatch) and fetches reports (the results' gate,
	// which reopenResults wakes).
	leads         atomic.Bool
	serveDispatch func(bool)
	reopenResults func()
	// limits are the operators' concurrency limits, as the leader's
	// claims read them.
	limits limitsCache
	// cluster counts the limits over the partitions (nil: one), for a
	// hand-over's claim.
	cluster *clusterLimits
	// stopping says whether an executor instance said it stops
	// (parking.stopping): what it releases gives its attempt back.
	stopping func(app, instance string) bool
	// eligibleOf are the last readings of the partition's eligible
	// weight, by request kind (eligible).
	eligibleMu sync.Mutex
	eligibleOf map[string]eligibleReading
	// eligibleTTL replaces the package's eligibleTTL (tests: 0 keeps it).
	eligibleTTL time.Duration
}

// journalEngineConfig is what the journal engine takes of the
// coordinator's configuration.
type journalEngineConfig struct {
	// Partition is the engine's partition.
	Partition int16
	// Balance, for a partition but the first, says which leases this
	// coordinator takes and keeps (journal.LeaderConfig.Balance).
	Balance journal.Balance
	// Holder names this coordinator in the lease.
	Holder string
	// Fairness and Scheme are the claims' (Config.Fairness, Config.Scheme).
	Fairness string
	Scheme   fairway.CountingScheme
	// RetryDelay is the first retry's delay (Config.RetryDelay).
	RetryDelay time.Duration
	// Clock is the host clock (Config.HostClock; nil: time.Now), which
	// the leader reads until it has read PostgreSQL's (journal.Leader.Now).
	Clock func() time.Time
	// Poll is how often the leader reads the journal's tail unwoken, and
	// Renew and TTL its lease's renewal and length (0: the defaults of
	// journal.LeaderConfig; a renewal reads the tail too): tests make them
	// long, to see what wakes the leader.
	Poll, Renew, TTL time.Duration
	// Shared says the partition's database holds other partitions too
	// (journal.LeaderConfig.Shared).
	Shared bool
}

func newJournalEngine(st, home *store.Store, cfg journalEngineConfig, log *slog.Logger,
	publish func(context.Context, []fairway.Event) error, claimable func(), serveDispatch func(bool)) *journalEngine {
	pool := st.Pool()
	e := &journalEngine{partition: cfg.Partition, db: pool, store: st, home: home, retryDelay: cfg.RetryDelay, scheme: cfg.Scheme, log: log, serveDispatch: serveDispatch, limits: limitsCache{read: home.Limits}}
	e.leader = journal.NewLeader(pool, journal.LeaderConfig{
		Partition: cfg.Partition, Balance: cfg.Balance, Registry: home.Pool(), Shared: cfg.Shared, Holder: cfg.Holder, Fairness: cfg.Fairness,
		Publish: publish, Claimable: func() { e.forgetEligible(); claimable() }, Leading: e.leading, Logger: log, Clock: cfg.Clock, Poll: cfg.Poll, Renew: cfg.Renew, TTL: cfg.TTL,
		Unreachable:       store.Unreachable,
		BeforeClaimAppend: func() { chaosBeforeClaimAppend(log) }, // a no-op but in the fault suite's build
	})
	return e
}

// serves says whether this coordinator hands out the partition's work
// now: it leads it, and its database answered the last call (a read of
// its state would wait behind its leader's try to reach it).
func (e *journalEngine) serves() bool { return e.leads.Load() && e.answers() }

// answers says whether the partition's database answered the last call
// and no call holding the leader's lock waits for it (journal.Leader
// Stalled: a primary frozen while its host still answers TCP): a read of
// its state, or a call of its leader's, would wait behind it.
func (e *journalEngine) answers() bool { return e.leader.Reachable() && !e.leader.Stalled() }

// leading is told when this coordinator comes to lead the partition and
// when it stops: it answers dispatch requests and fetches reports only
// while it leads.
func (e *journalEngine) leading(on bool) {
	e.leads.Store(on)
	if e.serveDispatch != nil {
		e.serveDispatch(on)
	}
	if on && e.reopenResults != nil {
		e.reopenResults()
	}
}

// run follows the partition, and leads it while it holds its lease,
// until ctx ends.
func (e *journalEngine) run(ctx context.Context) { e.leader.Run(ctx) }

// insert appends subs in one submitted row (a submission whose id was
// taken before is a duplicate: Created false; one that depends on a job
// never submitted is refused, its Err saying so) and wakes the leader.
func (e *journalEngine) insert(ctx context.Context, subs []fairway.Submission) ([]store.Inserted, error) {
	return e.insertSubs(ctx, subs, false)
}

// insertWorkflow is insert of a workflow's jobs: all of them, or none and
// the refusal of the first that depends on a job never submitted.
func (e *journalEngine) insertWorkflow(ctx context.Context, subs []fairway.Submission) error {
	_, err := e.insertSubs(ctx, subs, true)
	return err
}

func (e *journalEngine) insertSubs(ctx context.Context, subs []fairway.Submission, whole bool) ([]store.Inserted, error) {
	if !e.leader.Reachable() { // the ingest tries them again later (journal.Leader.Observe)
		return nil, fmt.Errorf("storing %d submissions in partition %d: %w", len(subs), e.partition, store.Interpret(journal.ErrUnreachable))
	}
	// Bounded: a frozen primary held the ingest's batch, and with it the
	// other partitions' submissions, for as long as it stayed frozen.
	ctx, cancel := e.leader.Bound(ctx)
	defer cancel()
	out, err := e.insertBounded(ctx, subs, whole)
	if err != nil {
		if late := journal.Answered(ctx, err); errors.Is(late, journal.ErrNoAnswer) {
			e.leader.Observe(late) // unreachable until a probe of the leader's is answered
			return nil, fmt.Errorf("storing %d submissions in partition %d: %w", len(subs), e.partition, store.Interpret(late))
		}
	}
	return out, err
}

func (e *journalEngine) insertBounded(ctx context.Context, subs []fairway.Submission, whole bool) ([]store.Inserted, error) {
	if !slices.ContainsFunc(subs, func(s fairway.Submission) bool { return len(s.DependsOn) > 0 }) {
		// The usual batch, with no dependency to check and no id taken,
		// in one round trip; else the transaction below keeps what it
		// can.
		err := journal.SubmitFresh(ctx, e.db, e.partition, itemsOf(subs))
		e.leader.Observe(err)
		switch {
		case err == nil:
			e.leader.Wake()
			return allCreated(subs), nil
		case !errors.Is(err, journal.ErrIDTaken):
			return nil, fmt.Errorf("storing %d submissions: %w", len(subs), store.Interpret(err))
		}
	}
	tx, err := e.db.Begin(ctx)
	e.leader.Observe(err)
	if err != nil {
		return nil, fmt.Errorf("storing %d submissions: %w", len(subs), store.Interpret(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	unknown, err := store.UnknownDependencies(ctx, tx, subs)
	if err != nil {
		return nil, err
	}
	items := make([]journal.Item, 0, len(subs))
	for i, s := range subs {
		switch {
		case unknown[i] != nil && whole:
			return nil, unknown[i]
		case unknown[i] == nil:
			items = append(items, journal.ItemOf(s))
		}
	}
	kept, err := journal.Submit(ctx, tx, e.partition, items)
	if err != nil {
		return nil, fmt.Errorf("storing %d submissions: %w", len(subs), store.Interpret(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("storing %d submissions: %w", len(subs), store.Interpret(err))
	}
	e.leader.Wake()
	created := make(map[fairway.JobRef]bool, len(kept))
	for _, it := range kept {
		created[fairway.JobRef{Group: it.Group, ID: it.ID}] = true
	}
	out := make([]store.Inserted, len(subs))
	for i, s := range subs {
		ref := fairway.JobRef{Group: s.Group, ID: s.ID}
		out[i] = store.Inserted{ID: s.ID, Created: created[ref]}
		switch {
		case unknown[i] != nil:
			out[i].Created, out[i].Err = false, unknown[i]
			continue
		case !created[ref]:
			out[i].Err = fairway.ErrDuplicate
		}
		delete(created, ref) // an id twice in subs: the first is the job
	}
	return out, nil
}

// itemsOf are subs as a submitted row's items.
func itemsOf(subs []fairway.Submission) []journal.Item {
	items := make([]journal.Item, len(subs))
	for i, s := range subs {
		items[i] = journal.ItemOf(s)
	}
	return items
}

// allCreated is the answer to subs when each made its job (no id was
// taken).
func allCreated(subs []fairway.Submission) []store.Inserted {
	out := make([]store.Inserted, len(subs))
	for i, s := range subs {
		out[i] = store.Inserted{ID: s.ID, Created: true}
	}
	return out
}

// claim claims jobs for a dispatch request from the leader's memory, on
// one partition (dispatcher.claimSpread claims over several). When the
// leader did not answer (this coordinator no longer leads, or the
// partition's database could not be reached at the last try), the
// request is answered fairway.ErrUnavailable, never empty: its id may
// have claimed jobs whose answer was lost.
func (e *journalEngine) claim(ctx context.Context, p store.ClaimParams) ([]fairway.Job, error) {
	jobs, unanswered, err := e.claimAnswered(ctx, p)
	if err == nil && unanswered != nil {
		// Not an empty answer: the executor would drop the request's id,
		// and a claim or a hand-over made under it whose commit's answer
		// was lost (the database restarted at the commit) kept its jobs
		// held by an instance that never got them, until MaxHold (an
		// hour; the fault suite's restart-postgres). Answered
		// unavailable, the executor asks again under the same id, which
		// hands them out once the leader answers.
		return nil, &fairway.Error{Code: fairway.CodeUnavailable, Message: fmt.Sprintf("claiming in journal partition %d: its leader cannot answer now (%s); ask again under the same request id", e.partition, unansweredWhy(unanswered))}
	}
	return jobs, err
}

// claimAnswered is claim that also says whether the partition's leader
// answered (unanswered nil): it then handed out every job p.ClaimID ever
// claimed here and still holds unstarted (journal.Leader.Claim). It did
// not when this coordinator does not lead the partition, its lease is
// gone, or its database could not be reached at the last try: nothing
// was claimed, and unanswered says which (journal.ErrNotLeading,
// ErrFenced or ErrUnreachable).
func (e *journalEngine) claimAnswered(ctx context.Context, p store.ClaimParams) (jobs []fairway.Job, unanswered, err error) {
	limits, err := e.limits.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	claimed, err := e.leader.Claim(ctx, journal.ClaimParams{
		Executor: p.Executor, Instance: p.Instance, Limit: p.Limit, ClaimID: p.ClaimID, MaxHeld: p.MaxHeld,
		Tasks: p.Tasks, Groups: p.Groups, Scheme: p.Scheme, TaskCaps: p.TaskLimits, ConcurrencyLimits: limits,
	})
	if errors.Is(err, journal.ErrNotLeading) || errors.Is(err, journal.ErrFenced) || errors.Is(err, journal.ErrUnreachable) {
		return nil, err, nil // nothing claimed here; the request's id is kept for the partition (markUnserved)
	}
	if err != nil {
		return nil, nil, store.Interpret(err)
	}
	chaosAfterClaimCommit(e.log, len(claimed)) // a no-op but in the fault suite's build, see chaoshook.go
	return claimedJobs(claimed, p.Executor), nil, nil
}

// unansweredWhy says, for a claim's reply and the coordinator's log, why
// a partition's leader did not answer (claimAnswered's unanswered).
func unansweredWhy(err error) string {
	switch {
	case errors.Is(err, journal.ErrFenced):
		return "another coordinator took its lease at this claim: it leads now"
	case errors.Is(err, journal.ErrNotLeading):
		return "this coordinator does not lead it: its lease is changing hands"
	case errors.Is(err, journal.ErrUnreachable):
		return "its PostgreSQL could not be reached at the last try"
	default:
		return err.Error()
	}
}

// claimedJobs are the jobs of a claim for executor, as a dispatch reply
// carries them.
func claimedJobs(claimed []journal.ClaimedJob, executor string) []fairway.Job {
	jobs := make([]fairway.Job, len(claimed))
	for i, c := range claimed {
		sub := c.Submission
		jobs[i] = fairway.Job{
			ID: c.Ref.ID, Group: c.Ref.Group, Task: c.Task, Args: c.Args, Priority: fairway.Priority(c.Priority),
			State: fairway.StateScheduled, Attempt: int(c.Attempt), Retries: int(c.Retries), MaxRetries: int(c.MaxRetries),
			Subject: sub.Subject, Submitter: sub.Submitter, Tracker: sub.Tracker, Timeout: sub.Timeout, TraceParent: sub.TraceParent,
			Submitted: c.Submitted, Executor: executor,
		}
		if len(jobs[i].Args) == 0 {
			jobs[i].Args = []byte("{}")
		}
	}
	return jobs
}

// insertFor is insert that hands the new jobs to r's idle executor in the
// submission's own transaction when the leader can (journal.Leader.HandOver:
// this coordinator leads, and the picks are those a claim would make),
// and returns the jobs handed over for r's reply; else it is insert, and
// none are.
func (e *journalEngine) insertFor(ctx context.Context, subs []fairway.Submission, r *parkedRequest) (_ []store.Inserted, handed []fairway.Job, _ error) {
	if r != nil && e.leads.Load() {
		limits, err := e.limits.get(ctx)
		if err != nil {
			return nil, nil, err
		}
		req := r.req
		taskCaps, maxHeld, release := e.cluster.handOver(limits, r, e.partition)
		defer func() { release(handed) }()
		if r.maxHeld > 0 && maxHeld <= 0 {
			// It holds what it may over the partitions: stored, not handed.
			out, err := e.insert(ctx, subs)
			return out, nil, err
		}
		stored, claimed, err := e.leader.HandOver(ctx, itemsOf(subs), journal.ClaimParams{
			Executor: req.Executor, Instance: req.Instance, Limit: req.Slots, ClaimID: req.RequestID, MaxHeld: maxHeld,
			Tasks: req.Tasks, Groups: req.Groups, Scheme: e.scheme, TaskCaps: taskCaps, ConcurrencyLimits: limits,
		})
		switch {
		case stored:
			chaosAfterClaimCommit(e.log, len(claimed))
			handed = claimedJobs(claimed, req.Executor)
			return allCreated(subs), handed, nil // no id was taken (HandOver)
		case err != nil && !errors.Is(err, journal.ErrNoHandOver) && !errors.Is(err, journal.ErrNotLeading):
			return nil, nil, fmt.Errorf("storing %d submissions: %w", len(subs), store.Interpret(err))
		}
	}
	out, err := e.insert(ctx, subs)
	return out, nil, err
}

// report has the leader append a batch of executors' reports (starts,
// progress, ends): the leader checks each against the attempt its job
// runs, so a stale or foreign report changes nothing. A coordinator that
// does not lead returns fairway.ErrUnavailable: the batch is delivered
// again, to the leader or once this one leads. It returns the progress
// that applied, for its subscribers (results.publishProgress).
func (e *journalEngine) report(ctx context.Context, started []store.Start, progress []store.Progress, outcomes []store.Outcome) ([]fairway.Progress, error) {
	// An outcome may bring its start: a report more.
	reports := make([]journal.Report, 0, len(started)+len(progress)+2*len(outcomes))
	item := func(a store.Attempt) journal.Item {
		return journal.Item{Group: a.Group, ID: a.JobID, Attempt: int32(a.Attempt), Executor: a.Executor, Instance: a.Instance} //nolint:gosec // G115: attempts are small
	}
	for _, s := range started {
		it := item(s.Attempt)
		if !s.At.IsZero() {
			it.RunAt = s.At.UnixMicro()
		}
		reports = append(reports, journal.Report{Kind: journal.Started, Item: it})
	}
	progressAt := len(reports)
	for _, p := range progress {
		it := item(p.Attempt)
		it.Progress = int16(min(max(p.Progress, 0), 100)) //nolint:gosec // G115: 0..100
		reports = append(reports, journal.Report{Kind: journal.Progress, Item: it})
	}
	now := e.leader.Now() // PostgreSQL's clock, as the jobs' times
	retries := e.retries(outcomes)
	for _, o := range outcomes {
		it := item(o.Attempt)
		kind := journal.Ended
		switch o.Kind {
		case fairway.OutcomeSuccess:
			it.Outcome, it.Result = journal.OutcomeSuccess, o.Result
		case fairway.OutcomeError, fairway.OutcomePermanent:
			it.Outcome, it.Error, it.Permanent = journal.OutcomeError, o.Error, o.Kind == fairway.OutcomePermanent
			// The retry delay doubled for each failed attempt before.
			it.RunAt = now.Add(e.retryDelay << min(retries[fairway.JobRef{Group: o.Group, ID: o.JobID}], 20)).UnixMicro()
		case fairway.OutcomeSnoozed:
			it.Outcome, it.RunAt = journal.OutcomeSnooze, now.Add(o.Snooze).UnixMicro()
		case fairway.OutcomeCancelled:
			it.Outcome, it.Error = journal.OutcomeCancelled, o.Error
		case fairway.OutcomeReleased:
			kind, it.Error = journal.Released, o.Error
			it.GiveBack = e.stopping != nil && e.stopping(o.Executor, o.Instance)
		default:
			continue
		}
		it.RanMS = o.RanMS
		if !o.EndedAt.IsZero() && kind == journal.Ended {
			it.EndedAt = o.EndedAt.UnixMicro()
		}
		if o.StartedAt != nil {
			// A start reported with its end: its own row first.
			s := item(o.Attempt)
			s.RunAt = o.StartedAt.UnixMicro()
			reports = append(reports, journal.Report{Kind: journal.Started, Item: s})
		}
		reports = append(reports, journal.Report{Kind: kind, Item: it})
	}
	if len(reports) == 0 {
		return nil, nil
	}
	applied, err := e.leader.Report(ctx, reports)
	if errors.Is(err, journal.ErrNotLeading) || errors.Is(err, journal.ErrFenced) {
		return nil, fmt.Errorf("%d reports: this coordinator does not lead the journal's partition: %w", len(reports), fairway.ErrUnavailable)
	}
	if err != nil {
		return nil, store.Interpret(err)
	}
	var refs []fairway.JobRef
	for i := progressAt; i < progressAt+len(progress); i++ {
		if applied[i] {
			refs = append(refs, fairway.JobRef{Group: reports[i].Item.Group, ID: reports[i].Item.ID})
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	now = e.leader.Now().UTC()
	held := e.leader.HeldJobs(refs)
	out := make([]fairway.Progress, 0, len(refs))
	for _, ref := range refs {
		h, ok := held[ref]
		if !ok {
			continue // ended meanwhile: its end says the rest
		}
		p := fairway.Progress{Group: ref.Group, JobID: ref.ID, Task: h.Task, Attempt: int(h.Attempt), Progress: int(h.Progress), Time: now}
		if h.Started != 0 {
			t := time.UnixMicro(h.Started).UTC()
			p.Started = &t
			p.EstimatedEnd = fairway.EstimateEnd(t, p.Progress, now)
		}
		out = append(out, p)
	}
	return out, nil
}

// retries are the failed attempts so far of the jobs whose outcomes are
// errors, read from the leader's state at once.
func (e *journalEngine) retries(outcomes []store.Outcome) map[fairway.JobRef]int32 {
	if !slices.ContainsFunc(outcomes, func(o store.Outcome) bool {
		return o.Kind == fairway.OutcomeError || o.Kind == fairway.OutcomePermanent
	}) {
		return nil // no lock taken for a batch of successes
	}
	out := map[fairway.JobRef]int32{}
	e.leader.Follow(func(s *journal.State) {
		for _, o := range outcomes {
			if o.Kind != fairway.OutcomeError && o.Kind != fairway.OutcomePermanent {
				continue
			}
			ref := fairway.JobRef{Group: o.Group, ID: o.JobID}
			if j := s.Jobs.Get(ref); j != nil {
				out[ref] = int32(j.Retries)
			}
		}
	})
	return out
}

// releaseLost gives back, counted, the jobs of lost executors and those
// held past what any attempt may take (the lease sweeper calls it when
// its gate is open). A coordinator that does not lead does nothing.
func (e *journalEngine) releaseLost(ctx context.Context, lease time.Duration) {
	lost, err := e.leader.ReleaseLost(ctx, lease)
	if err == nil {
		var overdue int
		overdue, err = e.leader.ReleaseOverdue(ctx, lease, e.leader.Now())
		lost += overdue
	}
	switch {
	case errors.Is(err, journal.ErrNotLeading), errors.Is(err, journal.ErrUnreachable):
	case err != nil:
		if ctx.Err() == nil {
			e.log.Warn("releasing the jobs of lost executors (journal)", "error", err)
		}
	case lost > 0:
		e.log.Warn("leases expired: jobs of lost executors released", "jobs", lost)
	}
}

// publishEvents publishes the events of the journal's rows through the
// relay's messages (batched by subject, as the outbox's).
func (c *Coordinator) publishEvents(ctx context.Context, evs []fairway.Event) error {
	for len(evs) > 0 {
		n := min(len(evs), c.relay.cfg.Batch)
		if err := c.relay.publish(ctx, evs[:n]); err != nil {
			return err
		}
		evs = evs[n:]
	}
	return nil
}
