package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/events"
	"github.com/fairwayhq/fairway/internal/store"
	"github.com/nats-io/nats.go/jetstream"
)

// resultBatch caps the executor reports applied in one go (a message
// holds one report or an array of them).
const resultBatch = 4096

// The memory of the results' read-ahead (see streamSources): one
// executor's report messages held at most, in reports and in bytes, and
// all executors' together; a turn of the round-robin between executors
// takes up to resultQuantum reports of each. Whatever waits in NATS, a
// coordinator holds at most resultWindowBytes of reports, plus one fetch
// per fetcher.
const (
	resultGroupWeight = 2 * resultBatch
	resultGroupBytes  = 4 << 20
	resultWindowBytes = 16 << 20
	resultQuantum     = 256
)

// resultsConfig configures the results service.
type resultsConfig struct {
	// Batch caps the reports applied in one go. Defaults to resultBatch.
	Batch int
}

func (c resultsConfig) withDefaults() resultsConfig {
	if c.Batch <= 0 {
		c.Batch = resultBatch
	}
	return c
}

// results applies the executors' reports (starts, progress, log lines,
// outcomes), read from the results streams each executor's on its own
// (streamSources: the shared stream's subject of each executor, and each
// executor's own stream in operator mode) into a fair inbox, and applied
// in batches that take from the executors round-robin: one executor's
// flood, however large, waits behind itself and delays no other's
// reports, and the coordinator's memory holds what the inbox bounds.
// Its goroutine is the inbox's loop, which Start starts (start) and Stop
// drains with the other consumers before the loops end.
type results struct {
	cfg resultsConfig
	serviceBase
	dead *deadLetters
	// journal's leader applies the reports, publishes their events and
	// follows them up (Coordinator.onJournal sets it).
	parts partitions
	// routes says whether this coordinator leads the cluster and a
	// partition (Coordinator.routes).
	routes func() bool
	// sources are where it reads the reports, once started.
	sources atomic.Pointer[streamSources]
}

func newResults(cfg resultsConfig, b serviceBase, dead *deadLetters) *results {
	return &results{cfg: cfg.withDefaults(), serviceBase: b, dead: dead}
}

// start reads the executors' reports, each executor's in its order, and
// applies them in batches. The fetches stop when cons drains; the loop
// ends with ctx, handing back what the inbox holds.
func (rs *results) start(ctx context.Context, subs *subscriptions, cons *consumers) error {
	weight := func(msg jetstream.Msg) int { return min(countSubmissions(msg.Data()), resultGroupWeight) }
	inbox := newFairInbox(resultGroupWeight, resultGroupBytes, resultWindowBytes, weight)
	inbox.q.quantum = resultQuantum
	// A fetch carries the largest message a stream may hold: a report
	// message is at most events.ReportMaxBytes, but a results stream of
	// an earlier version may hold messages up to max_payload.
	fetchBytes := max(2*events.ReportMaxBytes, int(cons.nc.MaxPayload()))
	sources := newStreamSources(cons.js, cons.nc, resultLayout(rs.subjects), rs.log, inbox, fetchBytes)
	// Only the journal's leaders can apply reports: a follower leaves
	// them in JetStream for the cluster's leader (clusterLead), which
	// leads the partitions, rather than taking and refusing them. It
	// fetches once it leads one: a partition it does not lead (its
	// database down, or its lease not taken yet) leaves its part of a
	// batch to be tried again, the others applied (applyParts). Fetching
	// only while it led them all, a primary down stopped every
	// partition's reports.
	sources.gate = rs.routes
	rs.sources.Store(sources)
	for _, e := range rs.parts {
		e.reopenResults = sources.reopen
	}
	return sources.run(ctx, subs, cons, rs.cfg.Batch, rs.apply)
}

// apply applies a batch in report order per job: starts, then
// progress and logs, then outcomes. A message that cannot be decoded is
// dead-lettered at once; one whose outcome PostgreSQL refuses does not hold
// up the others (see complete) and is dead-lettered after DeadLetterAfter
// deliveries.
func (rs *results) apply(ctx context.Context, msgs []jetstream.Msg) {
	defer observe(rs.metrics.reportBatch, rs.metrics.reportTime, len(msgs), time.Now())
	var started []store.Start
	var progress []store.Progress
	var logs []store.AttemptLog
	var outcomes []store.Outcome
	var outcomeMsg []int // the message of each outcome
	var reports []events.Report
	var reportMsg []int
	dead := make([]bool, len(msgs))
	for i, msg := range msgs {
		if size := len(msg.Data()); size > events.ReportMaxBytes {
			// Never decoded: a results stream of an earlier version, or a
			// server's max_payload, let a message through that no
			// executor of this version sends. Its first bytes are kept.
			rs.dead.moveKept(ctx, events.DeadReport, msg, oversizedKept,
				fmt.Sprintf("executor report message of %d bytes, above the %d bytes a report message may have (events.ReportMaxBytes)", size, events.ReportMaxBytes))
			dead[i] = true
			continue
		}
		batch, err := events.DecodeReports(msg.Data())
		if err != nil {
			rs.dead.move(ctx, events.DeadReport, msg, "undecodable executor report: "+err.Error())
			dead[i] = true
			continue
		}
		// The subject is the executor's identity: in operator mode its
		// credential publishes under its own app-id only.
		appID, ok := rs.subjects.ParseResults(msg.Subject())
		if !ok {
			rs.dead.move(ctx, events.DeadReport, msg, "executor reports on a malformed subject")
			dead[i] = true
			continue
		}
		for _, r := range batch {
			if r.Executor != "" && r.Executor != appID {
				rs.log.Warn("dropping an executor report about another executor's job", "subject", msg.Subject(),
					"executor", appID, "names", r.Executor, "job_id", r.JobID)
				continue
			}
			r.Executor = appID
			reports = append(reports, r)
			reportMsg = append(reportMsg, i)
		}
	}
	// A start reported in the same batch as its end is recorded with the
	// end: one row write instead of two.
	startedAt := map[store.Attempt]time.Time{}
	ended := map[store.Attempt]bool{}
	// A report names its job by group and id, and its sender by app-id and
	// instance: the store applies it only where they hold the attempt.
	attempt := func(r events.Report) store.Attempt {
		return store.Attempt{Group: r.Group, JobID: r.JobID, Attempt: r.Attempt, Executor: r.Executor, Instance: r.Instance}
	}
	for _, r := range reports {
		a := attempt(r)
		switch r.Type {
		case events.ReportStarted:
			startedAt[a] = r.Time
		case events.ReportDone:
			ended[a] = ended[a] || r.Outcome.Reportable()
		}
	}
	for k, r := range reports {
		a := attempt(r)
		switch r.Type {
		case events.ReportStarted:
			if !ended[a] {
				started = append(started, store.Start{Attempt: a, At: r.Time})
			}
		case events.ReportProgress:
			progress = append(progress, store.Progress{Attempt: a, Progress: r.Progress})
		case events.ReportLog:
			// The lines are the report's job's and attempt's, whatever they say.
			logs = append(logs, store.AttemptLog{Attempt: a, Lines: r.Logs})
		case events.ReportDone:
			if !r.Outcome.Reportable() {
				rs.log.Warn("dropping an executor report of unknown outcome", "outcome", fairway.TruncateRunes(string(r.Outcome), fairway.MaxNameLength),
					"executor", r.Executor, "job_id", fairway.TruncateRunes(r.JobID, fairway.MaxIDLength))
				continue
			}
			o := store.Outcome{Attempt: a, Kind: r.Outcome, Result: r.Result, Error: r.Error, RanMS: max(r.RanMS, 0), EndedAt: r.Time}
			if r.Outcome == fairway.OutcomeSnoozed {
				d, err := time.ParseDuration(r.Snooze)
				if err != nil || d < time.Second || d > fairway.MaxDelay {
					// The job moves on as a failed attempt rather than
					// waiting on a report that cannot say when.
					o.Kind, o.Error = fairway.OutcomeError, fmt.Sprintf("snoozed with an invalid delay %q: 1s..%s expected", fairway.TruncateRunes(r.Snooze, 64), fairway.MaxDelay)
				}
				o.Snooze = d
			}
			if t, ok := startedAt[a]; ok {
				o.StartedAt = &t
			} else if r.Started != nil {
				o.StartedAt = r.Started
			}
			outcomes = append(outcomes, o)
			outcomeMsg = append(outcomeMsg, reportMsg[k])
		default:
			rs.log.Warn("dropping an executor report of unknown type", "type", r.Type, "executor", r.Executor)
		}
	}
	refused, err := rs.applyParts(ctx, started, progress, logs, outcomes)
	if err != nil {
		// What was applied before the error is committed (a redelivery
		// finds those outcomes applied already).
		var live []jetstream.Msg
		for i, msg := range msgs {
			if !dead[i] {
				live = append(live, msg)
			}
		}
		rs.dead.retryLater(ctx, live, err)
		return
	}
	reasons := map[int]string{}
	for k, reason := range refused {
		reasons[outcomeMsg[k]] = reason
	}
	for i, msg := range msgs {
		switch {
		case dead[i]:
		case reasons[i] != "":
			rs.dead.refused(ctx, events.DeadReport, msg, reasons[i], nil)
		default:
			_ = msg.Ack()
		}
	}
}

// applyParts has the journal's leader apply the parts of a batch of
// reports. refused maps the index of each outcome PostgreSQL refuses on
// its own to the reason; the others are applied. The leader publishes
// the events and wakes the executors itself; the progress is published
// here.
func (rs *results) applyParts(ctx context.Context, started []store.Start, progress []store.Progress, logs []store.AttemptLog, outcomes []store.Outcome) (map[int]string, error) {
	if len(rs.parts) == 1 {
		return rs.applyIn(ctx, rs.parts[0], started, progress, logs, outcomes)
	}
	// Each partition's reports to its leader (this coordinator leads them
	// all: followCluster); one that cannot apply them yet (its lease not
	// taken yet) leaves the batch for a later try, where what the others
	// applied changes nothing (a report applies to its attempt once).
	type part struct {
		started  []store.Start
		progress []store.Progress
		logs     []store.AttemptLog
		outcomes []store.Outcome
		at       []int // outcomes' indexes in the batch
	}
	parts := make([]part, len(rs.parts))
	for _, s := range started {
		p := &parts[rs.parts.of(s.Group).partition]
		p.started = append(p.started, s)
	}
	for _, s := range progress {
		p := &parts[rs.parts.of(s.Group).partition]
		p.progress = append(p.progress, s)
	}
	for _, l := range logs {
		p := &parts[rs.parts.of(l.Group).partition]
		p.logs = append(p.logs, l)
	}
	for i, o := range outcomes {
		p := &parts[rs.parts.of(o.Group).partition]
		p.outcomes, p.at = append(p.outcomes, o), append(p.at, i)
	}
	// The partitions at once: each applies in transactions of its own.
	var busy []int
	for i, p := range parts {
		if len(p.started)+len(p.progress)+len(p.logs)+len(p.outcomes) > 0 {
			busy = append(busy, i)
		}
	}
	refusals := make([]map[int]string, len(busy))
	err := inParallel(len(busy), func(k int) error {
		p := parts[busy[k]]
		var err error
		refusals[k], err = rs.applyIn(ctx, rs.parts[busy[k]], p.started, p.progress, p.logs, p.outcomes)
		return err
	})
	if err != nil {
		return nil, err
	}
	refused := map[int]string{}
	for k, r := range refusals {
		for j, reason := range r {
			refused[parts[busy[k]].at[j]] = reason
		}
	}
	return refused, nil
}

// applyIn is applyParts in one partition, by its leader.
func (rs *results) applyIn(ctx context.Context, e *journalEngine, started []store.Start, progress []store.Progress, logs []store.AttemptLog, outcomes []store.Outcome) (map[int]string, error) {
	// Lines first: their attempts are still held before the batch's ends
	// are folded.
	if err := e.appendLogs(ctx, logs); err != nil && (errors.Is(err, fairway.ErrUnavailable) || ctx.Err() != nil) {
		// PostgreSQL is away, or the coordinator is stopping (its
		// statement was cancelled): the batch stays in JetStream, lines
		// included, for a later try.
		return nil, err
	} else if err != nil {
		rs.log.Warn("dropping job log lines PostgreSQL refused", "reports", len(logs), "error", err)
	}
	changed, err := e.report(ctx, started, progress, outcomes)
	if err == nil || len(outcomes) == 0 || errors.Is(err, fairway.ErrUnavailable) || ctx.Err() != nil {
		rs.publishProgress(changed)
		return nil, err
	}
	// PostgreSQL refused the batch: a record it cannot store (the leader
	// writes each ended job's in the batch's transaction). The starts and
	// progress go first, then the outcomes are sorted (findRefused).
	refusal := err
	if changed, err = e.report(ctx, started, progress, nil); err != nil {
		return nil, err
	}
	rs.publishProgress(changed)
	return rs.findRefused(ctx, outcomes, refusal, func(ctx context.Context, o []store.Outcome) error {
		_, err := e.report(ctx, nil, nil, o)
		return err
	})
}

// applyOutcomes applies a batch of outcomes in one statement (the
// journal leader's report).
type applyOutcomes func(context.Context, []store.Outcome) error

// findRefused sorts outcomes that PostgreSQL refused as a batch (with
// refusal): one statement finds the results it cannot store, and the rest
// are applied with apply, in halves until those refused on their own are
// found. refused maps the index of each refused outcome to the reason.
func (rs *results) findRefused(ctx context.Context, outcomes []store.Outcome, refusal error, apply applyOutcomes) (map[int]string, error) {
	rs.log.Warn("PostgreSQL refused a batch of outcomes; finding the ones it cannot store", "outcomes", len(outcomes), "error", refusal)
	results := make([][]byte, len(outcomes))
	for i, o := range outcomes {
		results[i] = o.Result
	}
	bad, err := rs.store.UnstorableJSON(ctx, results)
	if err != nil {
		return nil, err
	}
	refused := map[int]string{}
	isBad := map[int]bool{}
	for _, i := range bad {
		refused[i] = "PostgreSQL cannot store the result of job " + fairway.TruncateRunes(outcomes[i].JobID, fairway.MaxIDLength)
		isBad[i] = true
	}
	var rest []store.Outcome
	var restAt []int
	for i, o := range outcomes {
		if !isBad[i] {
			rest, restAt = append(rest, o), append(restAt, i)
		}
	}
	err = rs.completeSplit(ctx, rest, restAt, refused, len(bad) == 0, apply)
	return refused, err
}

// completeSplit applies outcomes (at[i] is the batch index of outcomes[i]);
// those PostgreSQL refuses on their own are added to refused. knownBad
// says that the whole of outcomes was refused already.
func (rs *results) completeSplit(ctx context.Context, outcomes []store.Outcome, at []int, refused map[int]string, knownBad bool, apply applyOutcomes) error {
	if len(outcomes) == 0 {
		return nil
	}
	if !knownBad {
		err := apply(ctx, outcomes)
		if err == nil || errors.Is(err, fairway.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		if len(outcomes) == 1 {
			refused[at[0]] = "PostgreSQL refused the outcome: " + fairway.TruncateBytes(err.Error(), fairway.MaxErrorTextSize)
			return nil
		}
	}
	half := len(outcomes) / 2
	if err := rs.completeSplit(ctx, outcomes[:half], at[:half], refused, false, apply); err != nil {
		return err
	}
	return rs.completeSplit(ctx, outcomes[half:], at[half:], refused, false, apply)
}

// publishProgress tells subscribers of <p>.progress.<group>.<task> how far
// jobs are (core NATS: a subscriber that is away misses them; the job row
// keeps the latest).
func (rs *results) publishProgress(ps []fairway.Progress) {
	for _, p := range ps {
		data, err := json.Marshal(p)
		if err == nil {
			err = rs.nc.Publish(rs.subjects.Progress(p.Group, p.Task), data)
		}
		if err != nil {
			rs.log.Debug("publishing progress", "job_id", p.JobID, "error", err)
		}
	}
}

// oversizedKept is how much of an oversized message the dead letters keep.
const oversizedKept = 64 << 10
