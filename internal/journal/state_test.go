package journal_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// row makes a row of kind from items, as the tail would read it.
func row(t *testing.T, id int64, kind journal.Kind, items ...journal.Item) journal.Row {
	t.Helper()
	body, err := journal.Encode(items)
	require.NoError(t, err)
	return journal.Row{ID: id, Kind: kind, Body: body}
}

func apply(t *testing.T, s *journal.State, r journal.Row) []journal.Change {
	t.Helper()
	out, err := s.Apply(r)
	require.NoError(t, err)
	return out
}

// TestFoldRules: the rules of the fold, one by one: a stale attempt's
// report and a claim of a job no longer waiting change nothing; a release
// that does not count gives the attempt back; a snooze is not a retry; a
// cancel marks a running job and ends a waiting one; a job's end names
// its dependents, and a dependency the state does not hold is named, for
// the leader to resolve with a Resolved row (which releases a dependent
// or, with an error, cancels it).
func TestFoldRules(t *testing.T) {
	s := journal.NewState()
	a := fairway.JobRef{Group: "g", ID: "a"}
	apply(t, s, row(t, 1, journal.Submitted, journal.Item{Group: "g", ID: "a", Task: "t", MaxRetries: 1}))
	require.Equal(t, fairway.StateWaiting, s.Jobs.Get(a).State())
	require.Empty(t, apply(t, s, row(t, 2, journal.Submitted, journal.Item{Group: "g", ID: "a", Task: "other"})), "a duplicate changed the job")
	require.Equal(t, "t", s.Jobs.Get(a).Task)

	e1 := func(attempt int32) journal.Item {
		return journal.Item{Group: "g", ID: "a", Attempt: attempt, Executor: "e1", Instance: "i1"}
	}
	e2 := func(attempt int32) journal.Item {
		return journal.Item{Group: "g", ID: "a", Attempt: attempt, Executor: "e2", Instance: "i2"}
	}
	with := func(it journal.Item, f func(*journal.Item)) journal.Item { f(&it); return it }
	apply(t, s, row(t, 3, journal.Claimed, e1(1)))
	require.Empty(t, apply(t, s, row(t, 4, journal.Claimed, e2(2))), "a held job claimed again")
	apply(t, s, row(t, 5, journal.Released, with(e1(1), func(it *journal.Item) { it.Error = "executor is stopping" })))
	want := journal.NewJob("t", fairway.StateWaiting, 1, 0)
	want.Attempt, want.MaxRetries = 1, 1
	require.Equal(t, *want, *s.Jobs.Get(a), "a release counts no retry and keeps the attempt")
	require.Empty(t, apply(t, s, row(t, 6, journal.Claimed, e2(1))), "a claim reused an attempt")
	apply(t, s, row(t, 6, journal.Claimed, e2(2)))
	require.Empty(t, apply(t, s, row(t, 7, journal.Ended, with(e1(2), func(it *journal.Item) { it.Outcome = journal.OutcomeSuccess }))), "another executor's report applied")
	require.Empty(t, apply(t, s, row(t, 7, journal.Ended, with(e2(1), func(it *journal.Item) { it.Outcome = journal.OutcomeSuccess }))), "an earlier attempt's report applied")
	apply(t, s, row(t, 8, journal.Ended, with(e2(2), func(it *journal.Item) { it.Outcome, it.RunAt = journal.OutcomeSnooze, 99 })))
	want.RunAt, want.Attempt = 99, 2
	require.Equal(t, *want, *s.Jobs.Get(a), "a snooze")
	apply(t, s, row(t, 9, journal.Claimed, e2(3)))
	apply(t, s, row(t, 10, journal.Ended, with(e2(3), func(it *journal.Item) { it.Outcome, it.RunAt, it.Error = journal.OutcomeError, 200, "boom" })))
	require.Equal(t, fairway.StateStuck, s.Jobs.Get(a).State())
	require.EqualValues(t, 1, s.Jobs.Get(a).Retries)
	apply(t, s, row(t, 11, journal.Claimed, e2(4)))
	require.Empty(t, apply(t, s, row(t, 12, journal.Started, e2(3))), "the third attempt's start applied to the fourth")
	apply(t, s, row(t, 12, journal.Started, e2(4)))
	require.Empty(t, apply(t, s, row(t, 13, journal.Expired, journal.Item{Group: "g", ID: "a"})), "a running job expired")
	apply(t, s, row(t, 14, journal.Cancel, journal.Item{Group: "g", ID: "a"}))
	require.True(t, s.Jobs.Get(a).CancelRequested())
	require.Equal(t, []journal.Change{{Job: a, From: fairway.StateRunning, To: fairway.StateCancelled, Error: "stopped", Task: "t", Attempt: 4, Executor: "e2"}},
		apply(t, s, row(t, 15, journal.Ended, with(e2(4), func(it *journal.Item) { it.Outcome, it.Error = journal.OutcomeError, "stopped" }))),
		"a cancelled job's error was retried")

	// A release counted (its executor was lost) is a failed attempt: out
	// of retries, the job fails.
	b := fairway.JobRef{Group: "g", ID: "b"}
	apply(t, s, row(t, 15, journal.Submitted, journal.Item{Group: "g", ID: "b", Task: "t"}))
	apply(t, s, row(t, 15, journal.Claimed, journal.Item{Group: "g", ID: "b", Attempt: 1, Executor: "e1", Instance: "i1"}))
	require.Equal(t, []journal.Change{{Job: b, From: fairway.StateScheduled, To: fairway.StateFailed, Error: "executor gone", Task: "t", Attempt: 1, Executor: "e1"}},
		apply(t, s, row(t, 15, journal.Released, journal.Item{Group: "g", ID: "b", Attempt: 1, Executor: "e1", Instance: "i1", Counted: true, Error: "executor gone"})))

	// Dependencies: x ← y ← z, and w waits for x and for a job that ended
	// before (unknown here).
	changes := apply(t, s, row(t, 16, journal.Submitted,
		journal.Item{Group: "g", ID: "x", Task: "t"},
		journal.Item{Group: "g", ID: "y", Task: "t", Waits: []string{"x"}},
		journal.Item{Group: "g", ID: "z", Task: "t", Waits: []string{"y"}},
		journal.Item{Group: "g", ID: "w", Task: "t", Waits: []string{"x", "gone"}}))
	require.Equal(t, []string{"gone"}, changes[3].Unknown)
	require.Equal(t, journal.Change{Job: fairway.JobRef{Group: "g", ID: "x"}, To: fairway.StateWaiting, Task: "t"}, changes[0], "a new job: no executor, attempt 0")
	require.Equal(t, []journal.Change{{Job: fairway.JobRef{Group: "g", ID: "x"}, From: fairway.StateWaiting, To: fairway.StateScheduled, Task: "t", Attempt: 1, Executor: "e"}},
		apply(t, s, row(t, 17, journal.Claimed, journal.Item{Group: "g", ID: "x", Attempt: 1, Executor: "e", Instance: "i"})), "a claim names the executor it hands the job to")
	changes = apply(t, s, row(t, 18, journal.Ended, journal.Item{Group: "g", ID: "x", Attempt: 1, Executor: "e", Instance: "i", Outcome: journal.OutcomeSuccess}))
	require.Equal(t, []journal.Change{
		{Job: fairway.JobRef{Group: "g", ID: "x"}, From: fairway.StateScheduled, To: fairway.StateSuccess, Task: "t", Attempt: 1, Executor: "e", Dependents: []string{"y", "w"}},
	}, changes, "x's end names its dependents for the leader to resolve; the fold releases none itself")
	require.Equal(t, fairway.StatePending, s.Jobs.Get(fairway.JobRef{Group: "g", ID: "y"}).State())
	apply(t, s, row(t, 19, journal.Resolved, journal.Item{Group: "g", ID: "y", Waits: []string{"x"}},
		journal.Item{Group: "g", ID: "w", Waits: []string{"x"}}))
	require.Equal(t, fairway.StateWaiting, s.Jobs.Get(fairway.JobRef{Group: "g", ID: "y"}).State(), "y waited for x alone")
	require.Equal(t, []string{"gone"}, s.Jobs.Get(fairway.JobRef{Group: "g", ID: "w"}).Waits(), "w still waits for gone")
	apply(t, s, row(t, 19, journal.Resolved, journal.Item{Group: "g", ID: "w", Waits: []string{"gone"}}))
	require.Equal(t, fairway.StateWaiting, s.Jobs.Get(fairway.JobRef{Group: "g", ID: "w"}).State())
	changes = apply(t, s, row(t, 20, journal.Cancel, journal.Item{Group: "g", ID: "y"}))
	require.Equal(t, []journal.Change{
		{Job: fairway.JobRef{Group: "g", ID: "y"}, From: fairway.StateWaiting, To: fairway.StateCancelled, Task: "t", Dependents: []string{"z"}},
	}, changes)
	changes = apply(t, s, row(t, 20, journal.Resolved, journal.Item{Group: "g", ID: "z", Waits: []string{"y"}, Error: "dependency y was cancelled"}))
	require.Equal(t, []journal.Change{
		{Job: fairway.JobRef{Group: "g", ID: "z"}, From: fairway.StatePending, To: fairway.StateCancelled, Error: "dependency y was cancelled", Task: "t"},
	}, changes, "a failed dependency's Resolved row cancels the dependent")

	// A paused group's jobs are not claimed.
	apply(t, s, row(t, 21, journal.Paused, journal.Item{Group: "g"}))
	require.Empty(t, apply(t, s, row(t, 22, journal.Claimed, journal.Item{Group: "g", ID: "w", Attempt: 1, Executor: "e"})))
	apply(t, s, row(t, 23, journal.Resumed, journal.Item{Group: "g"}))
	require.Len(t, apply(t, s, row(t, 24, journal.Claimed, journal.Item{Group: "g", ID: "w", Attempt: 1, Executor: "e"})), 1)
}

// TestFoldRulesOfShares: the fair shares' book is the fold of the rows
// that move it, as the row engine's tables are of its claims: a weight row
// sets a group's weight (a group new to the book starts at the clock); a
// claimed item's charge moves the clock to its group's start tag and the
// group past it; the run times of ended and released attempts are learned
// as one batch per row (the group charged the difference from the average
// it was charged, over its weight; the averages moved by RunWeight per
// run); a report that does not apply learns nothing.
func TestFoldRulesOfShares(t *testing.T) {
	s := journal.NewState()
	apply(t, s, row(t, 1, journal.Submitted,
		journal.Item{Group: "a", ID: "1", Task: "t"}, journal.Item{Group: "a", ID: "2", Task: "t"}, journal.Item{Group: "b", ID: "3", Task: "t"}))
	apply(t, s, row(t, 2, journal.Weight, journal.Item{Group: "a", Weight: 2}))
	require.InDelta(t, 2, s.Shares.Weight("a"), 0)
	require.InDelta(t, 1, s.Shares.Weight("b"), 0)
	require.Equal(t, map[string]float64{"a": 0}, s.Shares.VTimes)

	claim := func(id int64, group, job string, charge float64) {
		apply(t, s, row(t, id, journal.Claimed, journal.Item{Group: group, ID: job, Attempt: 1, Executor: "e", Instance: "i", Charge: charge}))
	}
	claim(3, "a", "1", 0.5) // a's start 0: the clock stays, a moves to 0.5
	claim(4, "b", "3", 1)   // b is new: it starts at the clock, 0
	require.InDelta(t, 0, s.Shares.Clock, 0)
	claim(5, "a", "2", 0.5) // a's start 0.5
	require.InDelta(t, 0.5, s.Shares.Clock, 0)
	require.InDelta(t, 1, s.Shares.VTimes["a"], 1e-12)
	require.InDelta(t, 1, s.Shares.VTimes["b"], 1e-12)
	apply(t, s, row(t, 6, journal.Claimed, journal.Item{Group: "a", ID: "1", Attempt: 1, Executor: "e", Instance: "i", Charge: 9}))
	require.InDelta(t, 1, s.Shares.VTimes["a"], 1e-12, "a claim that did not apply charged its group")

	ended := func(job string, ms float64) journal.Item {
		return journal.Item{Group: "a", ID: job, Attempt: 1, Executor: "e", Instance: "i", Outcome: journal.OutcomeSuccess, RanMS: ms}
	}
	stale := ended("1", 5000)
	stale.Attempt = 2
	apply(t, s, row(t, 7, journal.Ended, stale))
	require.Empty(t, s.Shares.RunMS, "a stale report's run time was learned")
	// Both of a's jobs end in one row, having run 3 s and 1 s: a was
	// charged 1 s each (the default), so 2 s more over its weight 2.
	apply(t, s, row(t, 8, journal.Ended, ended("1", 3000), ended("2", 1000)))
	require.InDelta(t, 2, s.Shares.VTimes["a"], 1e-12)
	require.Equal(t, map[[2]string]float64{{"a", "t"}: 2000, {"", "t"}: 2000}, s.Shares.RunMS)
	// b's job is released after 500 ms: b is credited 0.5 s (charged its
	// task's average, 2 s, minus what it ran: 2 - 0.5 = 1.5 s), and the
	// task's average moves towards it by RunWeight.
	apply(t, s, row(t, 9, journal.Released, journal.Item{Group: "b", ID: "3", Attempt: 1, Executor: "e", Instance: "i", RanMS: 500}))
	require.InDelta(t, 1-1.5, s.Shares.VTimes["b"], 1e-12)
	require.InDelta(t, 2000+fairness.RunWeight*(500-2000), s.Shares.RunMS[[2]string{"", "t"}], 1e-9)
	require.InDelta(t, 500, s.Shares.RunMS[[2]string{"b", "t"}], 0)
}

// TestFoldRulesOfRates: a rate row sets a rate limit (Starts 0 removes
// it); the jobs a claimed row starts take a token from each bucket that
// counts them (the task's, the group's own or each group's, the task's in
// the group), refilled to the row's time; a claim that did not apply takes
// nothing; a limit removed leaves its buckets, and one that counts nothing
// takes nothing.
func TestFoldRulesOfRates(t *testing.T) {
	s := journal.NewState()
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(r journal.Row, d time.Duration) journal.Row { r.At = t0.Add(d); return r }
	apply(t, s, row(t, 1, journal.Submitted,
		journal.Item{Group: "a", ID: "1", Task: "t"}, journal.Item{Group: "a", ID: "2", Task: "t"}, journal.Item{Group: "b", ID: "3", Task: "u"}))
	apply(t, s, row(t, 2, journal.Rate, journal.Item{Group: "*", Starts: 2, PeriodMS: 60_000})) // 2 a minute, each group
	apply(t, s, row(t, 3, journal.Rate, journal.Item{Task: "t", Starts: 10, PeriodMS: 60_000})) // 10 a minute of t
	apply(t, s, row(t, 4, journal.Rate, journal.Item{Task: "u", Starts: 1, PeriodMS: 1_000}))   // removed next
	apply(t, s, row(t, 5, journal.Rate, journal.Item{Task: "u", Starts: 0}))
	require.Len(t, s.Rates.Limits, 2)
	claim := func(id int64, d time.Duration, group, job string) {
		apply(t, s, at(row(t, id, journal.Claimed, journal.Item{Group: group, ID: job, Attempt: 1, Executor: "e", Instance: "i"}), d))
	}
	claim(6, 0, "a", "1")
	require.Equal(t, map[string]fairness.Bucket{"g:a": {Tokens: 1, At: t0.UnixMicro()}, "t:t": {Tokens: 9, At: t0.UnixMicro()}}, s.Rates.Buckets)
	claim(7, 15*time.Second, "a", "2") // a's bucket refilled by half a token, then one taken
	require.InDelta(t, 0.5, s.Rates.Buckets["g:a"].Tokens, 1e-9)
	require.InDelta(t, 9, s.Rates.Buckets["t:t"].Tokens, 1e-9, "t's bucket refills to its cap, 10, then one is taken")
	require.Equal(t, t0.Add(15*time.Second).UnixMicro(), s.Rates.Buckets["g:a"].At)
	claim(8, 20*time.Second, "a", "1") // held already: nothing taken
	require.InDelta(t, 0.5, s.Rates.Buckets["g:a"].Tokens, 1e-9)
	claim(9, 20*time.Second, "b", "3") // b's own bucket, full; u's limit is gone
	require.InDelta(t, 1, s.Rates.Buckets["g:b"].Tokens, 1e-9)
	require.NotContains(t, s.Rates.Buckets, "t:u")

	// A claim's limits hold the state's rates, and read a bucket as of
	// the claim's time.
	lim := s.Limits(nil, nil)
	require.NotNil(t, lim)
	require.False(t, lim.Rates.Empty())
	s.Rates.Fill(lim.Rates, []string{"g:a", "g:b", "t:t"}, t0.Add(29*time.Second).UnixMicro())
	require.False(t, lim.Rates.Allows(fairness.Candidate{Group: "a", Task: "t"}), "a's bucket holds 0.97 tokens at 29 s")
	require.True(t, lim.Rates.Allows(fairness.Candidate{Group: "b", Task: "t"}))
	lim = s.Limits(nil, nil)
	s.Rates.Fill(lim.Rates, []string{"g:a", "t:t"}, t0.Add(30*time.Second).UnixMicro())
	require.True(t, lim.Rates.Allows(fairness.Candidate{Group: "a", Task: "t"}), "a's bucket holds 1 token at 30 s")
}

// history drives random histories against a real PostgreSQL: writers
// append rows from transactions that interleave, commit out of order or
// roll back; a leader tails them and folds; and after every step its state
// must equal the fold of what PostgreSQL holds, read from scratch and from
// the last snapshot.
type history struct {
	t      *testing.T
	ctx    context.Context
	db     *pgxpool.Pool
	rng    *rand.Rand
	lease  journal.Lease
	leader *journal.State
	tail   *journal.Tail
	next   int
	// inFlight: the operation drawn goes in a transaction beside another.
	inFlight bool
	// acknowledged are the jobs whose submission committed; final the
	// ones the leader saw end; known each job's state by the changes.
	acknowledged map[fairway.JobRef]bool
	final        map[fairway.JobRef]fairway.State
	known        map[fairway.JobRef]fairway.State
	// withDeps counts the live jobs with dependencies seen by check.
	withDeps int
	// unknown are dependencies the leader must resolve.
	unknown []journal.Item
	groups  []string
	// snapKnown and snapFinal are known and final when the last snapshot
	// was taken: a restarted leader replays the changes after it.
	snapKnown, snapFinal map[fairway.JobRef]fairway.State
}

func newHistory(t *testing.T, seed uint64) *history {
	h := &history{t: t, ctx: t.Context(), db: pool(t), rng: rand.New(rand.NewPCG(seed, 31)), //nolint:gosec // G404: a test's histories
		leader: journal.NewState(), tail: &journal.Tail{}, groups: []string{"acme", "globex", "initech"},
		acknowledged: map[fairway.JobRef]bool{}, final: map[fairway.JobRef]fairway.State{}, known: map[fairway.JobRef]fairway.State{},
		snapKnown: map[fairway.JobRef]fairway.State{}, snapFinal: map[fairway.JobRef]fairway.State{}}
	var ok bool
	var err error
	h.lease, ok, err = journal.Acquire(h.ctx, h.db, 0, "leader", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	return h
}

// pick returns up to n live jobs, in a stable order, that match.
func (h *history) pick(n int, match func(*journal.Job) bool) []fairway.JobRef {
	var refs []fairway.JobRef
	for ref, j := range h.leader.Jobs.All() {
		if match(j) {
			refs = append(refs, ref)
		}
	}
	slices.SortFunc(refs, func(a, b fairway.JobRef) int {
		if a.Group != b.Group {
			return map[bool]int{true: -1, false: 1}[a.Group < b.Group]
		}
		return map[bool]int{true: -1, false: 1}[a.ID < b.ID]
	})
	h.rng.Shuffle(len(refs), func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
	return refs[:min(n, len(refs))]
}

// op is one transaction's append: a kind, its items, whether the leader
// appends it (fenced) and what committing it acknowledges.
type op struct {
	kind   journal.Kind
	items  []journal.Item
	fenced bool
}

// randomOp draws an operation from the leader's state, with some that
// must not apply (stale attempts, duplicates).
func (h *history) randomOp() op {
	held := func(j *journal.Job) bool {
		return j.State() == fairway.StateScheduled || j.State() == fairway.StateRunning
	}
	attempt := func(j *journal.Job) int32 {
		if h.rng.IntN(8) == 0 {
			return j.Attempt + 1 - h.rng.Int32N(3) // often stale
		}
		return j.Attempt
	}
	onHeld := func(kind journal.Kind, fill func(*journal.Item, *journal.Job)) op {
		// Reports go to the leader, which appends them: only submissions
		// are appended by any coordinator (see journal.Append).
		o := op{kind: kind, fenced: true}
		for _, ref := range h.pick(1+h.rng.IntN(3), held) {
			j := h.leader.Jobs.Get(ref)
			it := journal.Item{Group: ref.Group, ID: ref.ID, Attempt: attempt(j), Executor: j.Holder.Executor, Instance: j.Holder.Instance}
			if h.rng.IntN(10) == 0 {
				it.Instance = "another" // a report of another instance
			}
			fill(&it, j)
			o.items = append(o.items, it)
		}
		return o
	}
	anyJob := func(*journal.Job) bool { return true }
	switch r := h.rng.IntN(100); {
	case r < 25 || h.leader.Jobs.Len() == 0:
		return h.submission(!h.inFlight)
	case r < 45:
		o := op{kind: journal.Claimed, fenced: true}
		claim := "" // the dispatch request's id, half the time (one of few: some named again)
		if h.rng.IntN(2) == 0 {
			claim = "request-" + fmt.Sprint(h.rng.IntN(4))
		}
		for _, ref := range h.pick(1+h.rng.IntN(4), func(j *journal.Job) bool {
			return j.State() == fairway.StateWaiting || j.State() == fairway.StateStuck || h.rng.IntN(10) == 0
		}) {
			it := journal.Item{Group: ref.Group, ID: ref.ID, Attempt: attempt(h.leader.Jobs.Get(ref)) + 1,
				Executor: "e" + fmt.Sprint(h.rng.IntN(3)), Instance: "i", Claim: claim}
			if h.rng.IntN(2) == 0 {
				it.Charge = float64(1+h.rng.IntN(2000)) / 1000 // a claim with shares
			}
			o.items = append(o.items, it)
		}
		return o
	case r < 55:
		return onHeld(journal.Started, func(*journal.Item, *journal.Job) {})
	case r < 60:
		return onHeld(journal.Progress, func(it *journal.Item, _ *journal.Job) { it.Progress = int16(1 + h.rng.IntN(99)) }) //nolint:gosec // G115: 1 to 99
	case r < 78:
		return onHeld(journal.Ended, func(it *journal.Item, _ *journal.Job) {
			it.Outcome = []string{journal.OutcomeSuccess, journal.OutcomeSuccess, journal.OutcomeError, journal.OutcomeSnooze, journal.OutcomeCancelled}[h.rng.IntN(5)]
			it.Permanent = h.rng.IntN(5) == 0
			it.RunAt = int64(1000 + h.rng.IntN(1000))
			it.Error = "e"
			if h.rng.IntN(2) == 0 {
				it.RanMS = float64(1 + h.rng.IntN(5000)) // sharing time
			}
		})
	case r < 83:
		o := onHeld(journal.Released, func(it *journal.Item, _ *journal.Job) {
			it.Counted = h.rng.IntN(2) == 0
			if h.rng.IntN(3) == 0 {
				it.RanMS = float64(1 + h.rng.IntN(100))
			}
		})
		o.fenced = true
		return o
	case r < 89:
		o := op{kind: journal.Cancel, fenced: true}
		for _, ref := range h.pick(1+h.rng.IntN(2), anyJob) {
			o.items = append(o.items, journal.Item{Group: ref.Group, ID: ref.ID})
		}
		return o
	case r < 93:
		o := op{kind: journal.Release, fenced: true}
		for _, ref := range h.pick(2, func(j *journal.Job) bool { return j.State() == fairway.StatePending }) {
			o.items = append(o.items, journal.Item{Group: ref.Group, ID: ref.ID})
		}
		return o
	case r < 96:
		o := op{kind: journal.Expired, fenced: true}
		for _, ref := range h.pick(1, anyJob) {
			o.items = append(o.items, journal.Item{Group: ref.Group, ID: ref.ID})
		}
		return o
	case r < 98:
		kind := journal.Paused
		if h.rng.IntN(2) == 0 {
			kind = journal.Resumed
		}
		return op{kind: kind, fenced: true, items: []journal.Item{{Group: h.groups[h.rng.IntN(len(h.groups))]}}}
	case r < 99:
		return op{kind: journal.Weight, fenced: true, items: []journal.Item{{Group: h.groups[h.rng.IntN(len(h.groups))], Weight: float64(1+h.rng.IntN(8)) / 2}}}
	default:
		// A rate limit set or removed: of the task t, of a group, of
		// each group.
		it := journal.Item{Group: []string{"", h.groups[h.rng.IntN(len(h.groups))], "*"}[h.rng.IntN(3)], Starts: float64(h.rng.IntN(4)), PeriodMS: 1000}
		if it.Group == "" {
			it.Task = "t"
		}
		return op{kind: journal.Rate, fenced: true, items: []journal.Item{it}}
	}
}

// submission draws a batch of submissions (some with dependencies, on
// live jobs or on one that ended before, some duplicates of live jobs).
func (h *history) submission(dups bool) op {
	anyJob := func(*journal.Job) bool { return true }
	o := op{kind: journal.Submitted}
	for range 1 + h.rng.IntN(4) {
		group := h.groups[h.rng.IntN(len(h.groups))]
		h.next++
		it := journal.Item{Group: group, ID: fmt.Sprintf("j%04d", h.next), Task: "t", MaxRetries: h.rng.Int32N(3),
			RunAt: int64(h.rng.IntN(1000)), Pending: h.rng.IntN(10) == 0, Args: []byte(`{"n":1}`)}
		it.Trigger = it.Pending && h.rng.IntN(2) == 0 // a timed release (trigger_after)
		if h.rng.IntN(4) == 0 {
			for _, ref := range h.pick(1+h.rng.IntN(2), anyJob) {
				if ref.Group == group {
					it.Waits = append(it.Waits, ref.ID)
				}
			}
			if h.rng.IntN(3) == 0 {
				it.Waits = append(it.Waits, "ended-before") // a dependency the state does not hold
			}
		}
		// A duplicate only when nothing else is in flight: a submission
		// of a live job's id that commits while that job ends would bring
		// it back (docs/journal.md, "Open questions": ids must be unique
		// beyond the live jobs).
		if dups && h.rng.IntN(15) == 0 {
			if dup := h.pick(1, anyJob); len(dup) == 1 {
				it.Group, it.ID = dup[0].Group, dup[0].ID
			}
		}
		o.items = append(o.items, it)
	}
	return o
}

// begin opens a transaction and appends o in it.
func (h *history) begin(o op) pgx.Tx {
	tx, err := h.db.Begin(h.ctx)
	require.NoError(h.t, err)
	if len(o.items) == 0 {
		return tx
	}
	body, err := journal.Encode(o.items)
	require.NoError(h.t, err)
	if o.fenced {
		require.NoError(h.t, journal.AppendFenced(h.ctx, tx, 0, h.lease.Epoch, o.kind, body))
	} else {
		require.NoError(h.t, journal.Append(h.ctx, tx, 0, o.kind, body))
	}
	return tx
}

func (h *history) commit(tx pgx.Tx, o op) {
	require.NoError(h.t, tx.Commit(h.ctx))
	if o.kind == journal.Submitted {
		for _, it := range o.items {
			h.acknowledged[fairway.JobRef{Group: it.Group, ID: it.ID}] = true
		}
	}
}

// step runs one transaction, or two that interleave (the second commits
// first; the first commits or rolls back), or a leader's restart.
func (h *history) step() {
	switch r := h.rng.IntN(20); {
	case r == 0:
		// The leader restarts from the last snapshot (or from nothing).
		var err error
		h.leader, h.tail, err = journal.LoadSnapshot(h.ctx, h.db, 0)
		require.NoError(h.t, err)
		h.known, h.final = maps.Clone(h.snapKnown), maps.Clone(h.snapFinal)
	case r == 1:
		require.NoError(h.t, journal.SaveSnapshot(h.ctx, h.db, h.leader, h.tail))
		h.snapKnown, h.snapFinal = maps.Clone(h.known), maps.Clone(h.final)
	case r < 6:
		// The leader appends one batch at a time: at most one of two
		// transactions in flight together is the leader's.
		h.inFlight = true
		o1, o2 := h.randomOp(), h.randomOp()
		if o1.fenced && o2.fenced {
			o2 = h.submission(false)
		}
		h.inFlight = false
		tx1 := h.begin(o1)
		tx2 := h.begin(o2)
		h.commit(tx2, o2)
		if h.rng.IntN(2) == 0 {
			h.catchUp() // the leader reads tx2's row before tx1 ends
		}
		if h.rng.IntN(4) == 0 {
			require.NoError(h.t, tx1.Rollback(h.ctx))
		} else {
			h.commit(tx1, o1)
		}
	default:
		o := h.randomOp()
		if len(h.unknown) > 0 {
			o = op{kind: journal.Resolved, fenced: true, items: h.unknown}
			h.unknown = nil
		}
		h.commit(h.begin(o), o)
	}
	h.catchUp()
}

// catchUp reads the tail to its end and folds it into the leader's state,
// checking each change against what the changes said before.
func (h *history) catchUp() {
	for {
		rows, err := h.tail.Next(h.ctx, h.db, 5)
		require.NoError(h.t, err)
		if len(rows) == 0 {
			return
		}
		for _, r := range rows {
			changes, err := h.leader.Apply(r)
			require.NoError(h.t, err)
			for _, c := range changes {
				require.Equal(h.t, h.known[c.Job], c.From, "job %v changed from %s, but was %s", c.Job, c.From, h.known[c.Job])
				require.True(h.t, allowed(c.From, c.To), "job %v: %s → %s is no allowed transition (transitions_test.go)", c.Job, c.From, c.To)
				require.NotContains(h.t, h.final, c.Job, "job %v changed after its end", c.Job)
				h.known[c.Job] = c.To
				if c.To == fairway.StateSuccess || c.To == fairway.StateFailed || c.To == fairway.StateCancelled {
					h.final[c.Job] = c.To
				}
				if len(c.Dependents) > 0 {
					for _, id := range c.Dependents {
						it := journal.Item{Group: c.Job.Group, ID: id, Waits: []string{c.Job.ID}}
						if c.To != fairway.StateSuccess {
							it.Error = "dependency " + c.Job.ID + " " + string(c.To)
						}
						h.unknown = append(h.unknown, it)
					}
				}
				if len(c.Unknown) > 0 {
					it := journal.Item{Group: c.Job.Group, ID: c.Job.ID, Waits: c.Unknown}
					if h.rng.IntN(3) == 0 {
						it.Error = "dependency " + c.Unknown[0] + " failed"
					}
					h.unknown = append(h.unknown, it)
				}
			}
		}
	}
}

// fold applies what tail reads, to its end, to s.
func (h *history) fold(s *journal.State, tail *journal.Tail) *journal.State {
	_, err := tail.Fold(h.ctx, h.db, s)
	require.NoError(h.t, err)
	return s
}

// claimsHeld is a copy of s whose Claims list only the jobs each claim
// holds (ClaimedBy), in a set order: a claim's list keeps the jobs that
// left it until it holds none, and a restore lists them in its own order,
// neither of which the state's meaning depends on.
func claimsHeld(s *journal.State) *journal.State {
	c := *s
	c.Claims = map[journal.ClaimKey][]fairway.JobRef{}
	for key := range s.Claims {
		refs := s.ClaimedBy(key)
		slices.SortFunc(refs, func(a, b fairway.JobRef) int {
			return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.ID, b.ID))
		})
		c.Claims[key] = refs
	}
	return &c
}

// check compares the leader's state with the folds of PostgreSQL's rows
// and checks what must hold of any state.
func (h *history) check(step int) {
	fresh := h.fold(journal.NewState(), &journal.Tail{})
	require.Equal(h.t, claimsHeld(fresh), claimsHeld(h.leader), "step %d: the leader's state is not the fold of PostgreSQL's rows", step)
	restored, from, err := journal.LoadSnapshot(h.ctx, h.db, 0)
	require.NoError(h.t, err)
	restored = h.fold(restored, from)
	require.Equal(h.t, claimsHeld(h.leader), claimsHeld(restored), "step %d: the snapshot and the rows after it fold to another state", step)

	for ref := range h.acknowledged {
		live := h.leader.Jobs.Get(ref) != nil
		_, ended := h.final[ref]
		require.True(h.t, live != ended, "step %d: acknowledged job %v is live=%v, ended=%v", step, ref, live, ended)
	}
	heldTasks, heldGroups, heldBy, live := map[string]int{}, map[string]int{}, map[journal.Instance]map[fairway.JobRef]struct{}{}, map[string]int{}
	counts := map[journal.CountKey]int{}
	for ref, j := range h.leader.Jobs.All() {
		live[ref.Group]++
		counts[journal.CountKey{Group: ref.Group, Task: j.Task, State: j.State()}]++
		if j.State() == fairway.StateScheduled || j.State() == fairway.StateRunning {
			heldTasks[j.Task]++
			heldGroups[ref.Group]++
			if j.Holder != nil { // else the check below fails
				in := journal.Instance{Executor: j.Holder.Executor, Instance: j.Holder.Instance}
				if heldBy[in] == nil {
					heldBy[in] = map[fairway.JobRef]struct{}{}
				}
				heldBy[in][ref] = struct{}{}
			}
		}
	}
	require.Equal(h.t, heldTasks, h.leader.HeldTasks, "step %d: the held jobs per task", step)
	require.Equal(h.t, heldGroups, h.leader.HeldGroups, "step %d: the held jobs per group", step)
	require.Equal(h.t, heldBy, h.leader.Held, "step %d: the held jobs per instance", step)
	require.Equal(h.t, live, h.leader.Live, "step %d: the unfinished jobs per group", step)
	rows := map[int64]int32{}
	for _, j := range h.leader.Jobs.All() {
		rows[j.Row()]++
	}
	require.Equal(h.t, rows, h.leader.Rows, "step %d: the unfinished jobs per submitted row", step)
	require.Equal(h.t, counts, h.leader.Counts, "step %d: the unfinished jobs per group, task and state", step)
	claimHeld := map[journal.ClaimKey]int{}
	for _, j := range h.leader.Jobs.All() {
		if j.Holder != nil && j.Holder.Claim != "" {
			claimHeld[journal.ClaimKey{Instance: journal.Instance{Executor: j.Holder.Executor, Instance: j.Holder.Instance}, Claim: j.Holder.Claim}]++
		}
	}
	require.Equal(h.t, claimHeld, h.leader.ClaimHeld, "step %d: the held jobs per dispatch request", step)
	for key, n := range claimHeld {
		require.Len(h.t, h.leader.ClaimedBy(key), n, "step %d: the jobs request %v holds", step, key)
	}
	namedBy := map[fairway.JobRef]map[string]struct{}{}
	for group, jobs := range h.leader.DependsOn {
		for id, deps := range jobs {
			for _, d := range deps {
				dep := fairway.JobRef{Group: group, ID: d}
				if namedBy[dep] == nil {
					namedBy[dep] = map[string]struct{}{}
				}
				namedBy[dep][id] = struct{}{}
			}
		}
	}
	require.Equal(h.t, namedBy, h.leader.NamedBy, "step %d: the jobs that name each job in their depends_on", step)
	for group, jobs := range h.leader.DependsOn {
		require.NotEmpty(h.t, jobs, "step %d: group %s's jobs with dependencies", step, group)
		for id, deps := range jobs {
			require.NotNil(h.t, h.leader.Jobs.Get(fairway.JobRef{Group: group, ID: id}), "step %d: %s/%s ended, its depends_on is kept", step, group, id)
			require.NotEmpty(h.t, deps)
			h.withDeps++
		}
	}
	for ref, j := range h.leader.Jobs.All() {
		require.Equal(h.t, h.known[ref], j.State(), "step %d: job %v", step, ref)
		heldNow := j.State() == fairway.StateScheduled || j.State() == fairway.StateRunning
		require.Equal(h.t, heldNow, j.Holder != nil, "step %d: job %v is %s held by %+v", step, ref, j.State(), j.Holder)
		require.GreaterOrEqual(h.t, j.Attempt, int32(0))
		require.LessOrEqual(h.t, j.Retries, j.MaxRetries, "step %d: job %v retried beyond its maximum", step, ref)
		if len(j.Waits()) > 0 {
			require.Equal(h.t, fairway.StatePending, j.State(), "step %d: job %v waits for %v", step, ref, j.Waits())
		}
		for _, d := range j.Waits() {
			require.Contains(h.t, h.leader.DependsOn[ref.Group][ref.ID], d, "step %d: %v waits for %v, not in its depends_on", step, ref, d)
			dep := fairway.JobRef{Group: ref.Group, ID: d}
			if live := h.leader.Jobs.Get(dep) != nil; live {
				require.Contains(h.t, h.leader.Dependents[dep], ref.ID, "step %d: %v waits for %v, which does not know it", step, ref, dep)
			}
		}
	}
}

// TestTheLeadersStateIsTheFoldOfPostgreSQL is condition 1 of issue 31 for
// the journal's part: random histories (submissions with dependencies
// and duplicates, claims, starts, progress, ends of every outcome,
// releases, cancels, expiry, pauses, resolutions, stale reports, leader
// restarts from snapshots), written by transactions that interleave and
// roll back; after every step the leader's state equals the fold of the
// rows PostgreSQL holds, from scratch and from the last snapshot, no
// acknowledged job is lost, and no job changes after its end. Half the
// seeds store their snapshots in parts of 256 bytes.
func TestTheLeadersStateIsTheFoldOfPostgreSQL(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			if seed%2 == 1 {
				journal.SetSnapshotPartBytes(t, 256)
			}
			h := newHistory(t, seed)
			for step := range 150 {
				h.step()
				h.check(step)
			}
			require.NotEmpty(t, h.final, "no job ended: the histories test nothing")
			require.Positive(t, h.withDeps, "no job had dependencies: the histories test nothing of them")
			require.Positive(t, h.leader.Jobs.Len())
		})
	}
}

// TestAWaitingJobCostsTheLeaderLittleMemory is condition 6 of issue 31
// for the fold's part: 200,000 waiting jobs of 100 groups, with 26-byte
// ids and 200 bytes of args, cost the state at most waitingJobBytes of
// live heap each: no args held (they alone would be 200 bytes), names
// shared, a job in 64 bytes, its id in 32, its entry in its group's map
// about 50. The queues' entries are 24 bytes (the job's age and id); a
// heap's slice grows by doubling. docs/journal.md says what the leader's
// RSS needs besides.
func TestAWaitingJobCostsTheLeaderLittleMemory(t *testing.T) {
	const (
		jobs            = 200_000
		waitingJobBytes = 160
		queuedJobBytes  = 40
	)
	args := fmt.Appendf(nil, `{"payload":"%0186d"}`, 0) // 200 bytes
	var rows []journal.Row
	for i := 0; i < jobs; i += 1000 {
		items := make([]journal.Item, 1000)
		for k := range items {
			items[k] = journal.Item{Group: fmt.Sprintf("tenant-%03d", (i+k)%100), ID: fmt.Sprintf("01JABCDEFGHJKMNPQRST%06d", i+k),
				Task: "export", Priority: "low", MaxRetries: 3, RunAt: 1_700_000_000_000_000, Args: args}
		}
		body, err := journal.Encode(items)
		require.NoError(t, err)
		rows = append(rows, journal.Row{ID: int64(len(rows) + 1), Kind: journal.Submitted, Body: body})
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := journal.NewState()
	for _, r := range rows {
		_, err := s.Apply(r)
		require.NoError(t, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	require.Equal(t, jobs, s.Jobs.Len())
	perJob := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / jobs //nolint:gosec // G115: heap sizes are far below 2^63
	t.Logf("%d bytes of live heap per waiting job in the state", perJob)
	require.LessOrEqual(t, perJob, int64(waitingJobBytes), "a waiting job costs the leader's state more than it may")
	require.Positive(t, perJob)

	// The claimable jobs' index (the queues a claim reads): an entry per
	// job in its group's list.
	q := journal.NewQueues(s, 1_800_000_000_000_000)
	runtime.GC()
	var indexed runtime.MemStats
	runtime.ReadMemStats(&indexed)
	perEntry := (int64(indexed.HeapAlloc) - int64(after.HeapAlloc)) / jobs //nolint:gosec // G115: heap sizes are far below 2^63
	t.Logf("%d bytes of live heap per waiting job in the queues", perEntry)
	require.LessOrEqual(t, perEntry, int64(queuedJobBytes), "a waiting job costs the leader's queues more than it may")
	require.Positive(t, perEntry)
	runtime.KeepAlive(rows) // alive in every measure: the differences are the state and the queues
	runtime.KeepAlive(s)
	runtime.KeepAlive(q)
}

// TestFoldRulesOfTrackers: a job's tracker is its own while it is live:
// a submission of the same tracker in its group is rejected, naming the
// holder (its event a conflict on field tracker), one in another group or
// of another tracker is not, and once the holder ended the tracker is free.
func TestFoldRulesOfTrackers(t *testing.T) {
	s := journal.NewState()
	apply(t, s, row(t, 1, journal.Submitted, journal.Item{Group: "g", ID: "a", Task: "t", Tracker: "mail-42"}))
	r := row(t, 2, journal.Submitted, journal.Item{Group: "g", ID: "b", Task: "t", Tracker: "mail-42"},
		journal.Item{Group: "h", ID: "c", Task: "t", Tracker: "mail-42"}, journal.Item{Group: "g", ID: "d", Task: "t", Tracker: "mail-43"})
	changes := apply(t, s, r)
	require.Len(t, changes, 3)
	require.Equal(t, fairway.StateRejected, changes[0].To)
	require.Contains(t, changes[0].Error, `tracker "mail-42" is held by job a`)
	require.Nil(t, s.Jobs.Get(fairway.JobRef{Group: "g", ID: "b"}), "a rejected submission makes no job")
	require.Equal(t, fairway.StateWaiting, changes[1].To, "another group's tracker")
	require.Equal(t, fairway.StateWaiting, changes[2].To, "another tracker")
	ev := journal.EventsOf(0, r, changes)[0]
	require.Equal(t, fairway.CodeDuplicate, ev.Code)
	require.Equal(t, "tracker", ev.Field)

	apply(t, s, row(t, 3, journal.Claimed, journal.Item{Group: "g", ID: "a", Attempt: 1, Executor: "e", Instance: "i"}))
	require.Equal(t, fairway.StateRejected, apply(t, s, row(t, 4, journal.Submitted, journal.Item{Group: "g", ID: "e", Task: "t", Tracker: "mail-42"}))[0].To,
		"held while it runs")
	apply(t, s, row(t, 5, journal.Ended, journal.Item{Group: "g", ID: "a", Attempt: 1, Executor: "e", Instance: "i", Outcome: journal.OutcomeSuccess}))
	require.Equal(t, fairway.StateWaiting, apply(t, s, row(t, 6, journal.Submitted, journal.Item{Group: "g", ID: "f", Task: "t", Tracker: "mail-42"}))[0].To,
		"free once its holder ended")
	require.Equal(t, map[fairway.JobRef]string{{Group: "g", ID: "mail-42"}: "f", {Group: "h", ID: "mail-42"}: "c", {Group: "g", ID: "mail-43"}: "d"}, s.Trackers)
}

// TestACorruptSnapshotIsRefused: a snapshot cut at any length, or with a
// byte changed, is refused with an error (or restored as some state), never
// a panic or an allocation its size does not justify.
func TestACorruptSnapshotIsRefused(t *testing.T) {
	s := journal.NewState()
	apply(t, s, row(t, 1, journal.Submitted,
		journal.Item{Group: "g", ID: "a", Task: "t", Priority: "high", RunAt: 5, ExpiresAt: 9, MaxRetries: 2, Timeout: "90s"},
		journal.Item{Group: "g", ID: "b", Task: "t", Waits: []string{"a"}},
		journal.Item{Group: "h", ID: "c", Task: "u", Tracker: "key-1"}, journal.Item{Group: "k", ID: "d", Task: "u"}, journal.Item{Group: "k", ID: "e", Task: "u"}))
	apply(t, s, row(t, 2, journal.Claimed, journal.Item{Group: "g", ID: "a", Attempt: 1, Executor: "e", Instance: "i"}))
	apply(t, s, row(t, 3, journal.Cancel, journal.Item{Group: "g", ID: "a"}))
	apply(t, s, row(t, 4, journal.Paused, journal.Item{Group: "h"}))
	apply(t, s, row(t, 5, journal.Weight, journal.Item{Group: "h", Weight: 3}))
	apply(t, s, row(t, 6, journal.Claimed, journal.Item{Group: "k", ID: "d", Attempt: 1, Executor: "e", Instance: "i", Charge: 0.5}))
	apply(t, s, row(t, 7, journal.Ended, journal.Item{Group: "k", ID: "d", Attempt: 1, Executor: "e", Instance: "i", Outcome: journal.OutcomeSuccess, RanMS: 120}))
	require.NotEmpty(t, s.Shares.RunMS, "the snapshot holds no run times")
	apply(t, s, row(t, 8, journal.Rate, journal.Item{Group: "*", Starts: 5, PeriodMS: 1000}))
	apply(t, s, row(t, 9, journal.Claimed, journal.Item{Group: "k", ID: "e", Attempt: 1, Executor: "e", Instance: "i", Claim: "request-1"}))
	require.NotEmpty(t, s.Rates.Buckets, "the snapshot holds no rate buckets")
	require.NotEmpty(t, s.Claims, "the snapshot holds no claim's request id")
	snap, err := s.Snapshot()
	require.NoError(t, err)
	restored, err := journal.Restore(snap)
	require.NoError(t, err)
	require.Equal(t, s, restored)
	for n := range len(snap) {
		_, err := journal.Restore(snap[:n])
		require.Error(t, err, "a snapshot cut at %d of %d bytes was restored", n, len(snap))
	}
	for i := range snap {
		for _, b := range []byte{0, 0x7f, 0xff} {
			bad := slices.Clone(snap)
			bad[i] = b
			_, _ = journal.Restore(bad) // an error or some state; not a panic
		}
	}
}

// TestAJobFitsIn64Bytes: the state holds a Job for every waiting job
// (condition 6 of issue 31: 1,000,000 waiting jobs within 400 MiB).
func TestAJobFitsIn64Bytes(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(journal.Job{}), uintptr(64))
}

// TestASnapshotIsStoredInParts: a snapshot larger than a part is stored
// in several and read back whole; a smaller one after it, in one part,
// leaves none of the first one's behind.
func TestASnapshotIsStoredInParts(t *testing.T) {
	ctx, db := t.Context(), pool(t)
	journal.SetSnapshotPartBytes(t, 1024)
	parts := func() (n int) {
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM fairway_journal_snapshot_part WHERE partition = 0`).Scan(&n))
		return n
	}
	var items []journal.Item
	for i := range 500 {
		items = append(items, journal.Item{Group: fmt.Sprintf("g%d", i%7), ID: fmt.Sprintf("job-%04d", i), Task: "t", Priority: "high", MaxRetries: 3})
	}
	body, err := journal.Encode(items)
	require.NoError(t, err)
	require.NoError(t, journal.Append(ctx, db, 0, journal.Submitted, body))
	s, tail := journal.NewState(), &journal.Tail{}
	_, err = tail.Fold(ctx, db, s)
	require.NoError(t, err)
	require.NoError(t, journal.SaveSnapshot(ctx, db, s, tail))
	require.Greater(t, parts(), 5, "a snapshot of 500 jobs in parts of 1 KiB")
	restored, _, err := journal.LoadSnapshot(ctx, db, 0)
	require.NoError(t, err)
	require.Equal(t, claimsHeld(s), claimsHeld(restored))

	small := journal.NewState()
	require.NoError(t, journal.SaveSnapshot(ctx, db, small, tail))
	require.Equal(t, 1, parts(), "the larger snapshot's parts were left behind")
	restored, _, err = journal.LoadSnapshot(ctx, db, 0)
	require.NoError(t, err)
	require.Zero(t, restored.Jobs.Len())
}
