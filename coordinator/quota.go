package coordinator

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/prometheus/client_golang/prometheus"
)

// Quota defaults (Config.QuotaJobs, QuotaSubmitRate, QuotaSubmitBurst,
// QuotaSubmitBytesRate, QuotaSubmitBytesBurst).
const (
	QuotaJobsDefault             = 100_000
	QuotaSubmitRateDefault       = 1000
	QuotaSubmitBurstDefault      = 5000
	QuotaSubmitBytesRateDefault  = 16 << 20
	QuotaSubmitBytesBurstDefault = 64 << 20
)

// openCountTTL is how long a group's count of queued jobs is trusted
// (plus this coordinator's own submissions since) before it is counted
// again: other coordinators' submissions and finished jobs show after at
// most this long.
const openCountTTL = time.Second

// quotas enforces the per-group quotas of one coordinator: a token bucket
// of submissions per group, and the count of a group's queued jobs.
// Ingest, the request/reply API's submit and workflows admit their
// submissions through it.
type quotas struct {
	jobs         int     // queued jobs per group; <= 0: unlimited
	rate         float64 // submissions per second per group; <= 0: unlimited
	submits      *rateLimiter
	byteRate     float64 // bytes of submissions per second per group; <= 0: unlimited
	submitBytes  *rateLimiter
	parts        partitions             // count the queued jobs (Coordinator.onJournal sets them)
	refused      *prometheus.CounterVec // counts the refusals, by quota (coordMetrics.quotaRefused)
	mu           sync.Mutex
	open         map[string]openCount
	now          func() time.Time
	maxGroupsMem int
}

type openCount struct {
	n  int
	at time.Time
}

func newQuotas(jobs int, rate float64, burst int, byteRate float64, byteBurst int, refused *prometheus.CounterVec) *quotas {
	return &quotas{jobs: jobs, rate: rate, submits: newRateLimiter(rate, burst), byteRate: byteRate, submitBytes: newRateLimiter(byteRate, byteBurst),
		refused: refused, open: map[string]openCount{}, now: time.Now, maxGroupsMem: 100_000}
}

// deferSubmits takes n tokens of group's bucket of submissions and bytes
// tokens of its bucket of bytes if each has any left (they may go into
// debt by a message's submissions and bytes), or says how long until they
// have: ingest stores a group over its rate later (fairInbox.allow). The
// bytes keep a group that sends few, large submissions to a pace too.
func (q *quotas) deferSubmits(group string, n, bytes int) (bool, time.Duration) {
	now := q.now()
	if ok, wait := q.submitBytes.take(group, 1, 0, now); !ok {
		return false, wait
	}
	if ok, wait := q.submits.allowN(group, n, now); !ok {
		return false, wait
	}
	q.submitBytes.take(group, 0, float64(bytes), now)
	return true, 0
}

// submitWaitDefault bounds the wait of a request/reply submission over its
// group's rate when the request names no deadline (see waitSubmits).
const submitWaitDefault = 2 * time.Second

// callerReplyMargin is kept of a request's deadline for its reply.
const callerReplyMargin = 100 * time.Millisecond

// waitSubmits waits until group's bucket has tokens for n submissions, up
// to the deadline the request names (events.DeadlineHeader, see
// Coordinator.handle), or submitWaitDefault if it names none, and never
// past ctx's: over its rate a request/reply
// submission is stored later, like an asynchronous one, and refused only
// if it would have to wait past its deadline.
func (q *quotas) waitSubmits(ctx context.Context, group string, n, bytes int) error {
	if q.rate <= 0 && q.byteRate <= 0 {
		return nil
	}
	deadline, ok := ctx.Value(callerDeadlineKey{}).(time.Time)
	if ok {
		deadline = deadline.Add(-callerReplyMargin) // for the reply to reach it
	} else {
		deadline = time.Now().Add(submitWaitDefault)
	}
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for {
		ok, wait := q.deferSubmits(group, n, bytes)
		if ok {
			return nil
		}
		if time.Now().Add(wait).After(deadline) {
			q.refused.WithLabelValues("rate").Inc()
			return q.errSubmitRate(group, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return q.errSubmitRate(group, wait)
		case <-t.C:
		}
	}
}

// errSubmitRate and errJobs are the refusals.
func (q *quotas) errSubmitRate(group string, wait time.Duration) *fairway.Error {
	return &fairway.Error{Code: fairway.CodeQuota, Field: "group",
		Message: fmt.Sprintf("group %s submits faster than its quota of %g submissions and %s per second, and this request would wait %s, past its deadline: give it a longer deadline, or submit asynchronously (stored later, never refused for the rate)",
			group, q.rate, formatRateBytes(q.byteRate), max(wait, time.Millisecond).Round(time.Millisecond))}
}

// formatRateBytes writes a byte rate in MiB (or "unlimited bytes").
func formatRateBytes(r float64) string {
	if r <= 0 {
		return "unlimited bytes"
	}
	return fmt.Sprintf("%.3g MiB", r/(1<<20))
}

func errJobs(group string, jobs int) *fairway.Error {
	return &fairway.Error{Code: fairway.CodeQuota, Field: "group",
		Message: fmt.Sprintf("group %s has %d queued jobs, its quota: submit again once some have run", group, jobs)}
}

// admit applies the queued-jobs quota to valid submissions, in order:
// errs[i] is the quota refusal of subs[i], or nil. The queued jobs of the
// batch's groups are counted in one statement, when their count is older
// than openCountTTL. The submission rate is not a refusal: ingest defers
// (deferSubmits) and the request/reply API waits (waitSubmits).
func (q *quotas) admit(ctx context.Context, subs []fairway.Submission) ([]error, error) {
	errs := make([]error, len(subs))
	if q.jobs <= 0 {
		return errs, nil
	}
	now := q.now()
	var stale []string
	seen := map[string]bool{}
	q.mu.Lock()
	for i, s := range subs {
		if errs[i] != nil || seen[s.Group] {
			continue
		}
		seen[s.Group] = true
		if oc, ok := q.open[s.Group]; !ok || now.Sub(oc.at) > openCountTTL {
			stale = append(stale, s.Group)
		}
	}
	q.mu.Unlock()
	if len(stale) > 0 {
		counts, err := q.countQueued(ctx, stale)
		if err != nil {
			return nil, err
		}
		q.mu.Lock()
		if len(q.open)+len(stale) > q.maxGroupsMem {
			for g, oc := range q.open {
				if now.Sub(oc.at) > openCountTTL {
					delete(q.open, g)
				}
			}
		}
		for _, g := range stale {
			if n, ok := counts[g]; ok {
				q.open[g] = openCount{n: n, at: now}
			}
		}
		q.mu.Unlock()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, s := range subs {
		if errs[i] != nil {
			continue
		}
		oc := q.open[s.Group]
		if oc.n >= q.jobs {
			errs[i] = errJobs(s.Group, q.jobs)
			q.refused.WithLabelValues("jobs").Inc()
			continue
		}
		// Counted until the next count: a duplicate id counts too.
		oc.n++
		q.open[s.Group] = oc
	}
	return errs, nil
}

// admitOne is admit for one submission from the request/reply API, after
// waiting for the group's rate (waitSubmits).
func (q *quotas) admitOne(ctx context.Context, sub fairway.Submission) error {
	if err := q.waitSubmits(ctx, sub.Group, 1, len(sub.Args)); err != nil {
		return err
	}
	errs, err := q.admit(ctx, []fairway.Submission{sub})
	if err != nil {
		return err
	}
	return errs[0]
}

// countQueued counts the unfinished jobs of groups, as the partition's
// state this coordinator folded holds them.
func (q *quotas) countQueued(ctx context.Context, groups []string) (map[string]int, error) {
	if len(q.parts) == 1 {
		return q.parts[0].leader.LiveOf(ctx, groups)
	}
	out := map[string]int{}
	byPart := map[*journalEngine][]string{}
	for _, g := range groups {
		byPart[q.parts.of(g)] = append(byPart[q.parts.of(g)], g)
	}
	for e, gs := range byPart {
		if !e.answers() {
			continue // its groups keep their last counts (admit); their submissions wait for its database
		}
		counts, err := e.leader.LiveOf(ctx, gs)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, counts)
	}
	return out, nil
}
