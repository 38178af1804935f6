package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
)

// SetWeight sets group's weight in the fair shares (fairness.CheckWeight
// says which are allowed): the leader appends a weight row and folds it,
// so that its next claim counts it. ErrNotLeading when this coordinator
// does not lead.
func (l *Leader) SetWeight(ctx context.Context, group string, weight float64) error {
	if err := fairway.CheckName("group", group); err != nil {
		return err
	}
	if err := fairness.CheckWeight(weight); err != nil {
		return err
	}
	if err := l.lockLeading(ctx); err != nil {
		return err
	}
	defer l.unlockLeading()
	return l.appendOne(ctx, Weight, Item{Group: group, Weight: weight})
}

// SetRateLimit sets a rate limit (r.Starts per r.Period of r.Task in
// r.Group: fairway.ParseRate reads "100/m"), or removes it (Starts 0),
// by a rate row the leader appends and folds. ErrNotLeading when this
// coordinator does not lead.
func (l *Leader) SetRateLimit(ctx context.Context, r fairness.RateLimit) error {
	if r.Task == "" && r.Group == "" {
		return fairway.Invalid("scope", "missing: name a task, a group, or both")
	}
	if r.Starts < 0 || (r.Starts > 0 && r.Period < time.Millisecond) {
		return fairway.Invalid("rate", "%v per %v: a rate is a positive number of starts per a period of 1ms or more", r.Starts, r.Period)
	}
	if err := l.lockLeading(ctx); err != nil {
		return err
	}
	defer l.unlockLeading()
	return l.appendOne(ctx, Rate, Item{Task: r.Task, Group: r.Group, Starts: r.Starts, PeriodMS: r.Period.Milliseconds()})
}

// appendOne appends a row of one item as the leader, and folds it.
// Called with l.mu held, while leading (lockLeading).
func (l *Leader) appendOne(ctx context.Context, kind Kind, it Item) error {
	read, err := l.appendBatches(ctx, []batch{{kind: kind, items: []Item{it}}})
	if err != nil {
		return err
	}
	return l.fold(ctx, read)
}

// ErrNotLeading is a claim's answer from a coordinator that does not lead
// the partition (or no longer does).
var ErrNotLeading = errors.New("journal: this coordinator does not lead the partition")

// ClaimedJob is a job a claim handed to an executor, with what it needs
// to run it.
type ClaimedJob struct {
	Ref      fairway.JobRef
	Task     string
	Priority string
	Attempt  int32
	// Retries are its failed attempts so far, MaxRetries how many it may
	// have.
	Retries, MaxRetries int32
	// Args are the job's arguments, read from the row that submitted it;
	// Submission is that row's item (its timeout, trace context, subject,
	// submitter, tracker), and Submitted the row's time.
	Args       []byte
	Submission Item
	Submitted  time.Time
}

// Claim takes up to p.Limit jobs for p.Executor's instance p.Instance from
// the leader's memory (Queues.Claim, with p.ConcurrencyLimits, p.TaskCaps
// and the state's rate limits; with weights, or sharing time, by the
// shares of the state's book: each claimed item carries its charge, and
// the fold moves the book and takes the rate limits' tokens), appends one claimed row with the
// leader's epoch, folds the journal to it and returns the jobs that row
// made scheduled, with their arguments (one read of the rows that
// submitted them). Nothing is handed out before the row is committed and
// folded: a job the fold did not give to this claim (cancelled meanwhile
// by a row that came first) is not returned. ErrNotLeading when this
// coordinator does not lead; ErrFenced when it learns that another took
// the lease (it leads no more). Claims are serialised: the leader appends
// one batch after the other (docs/journal.md, "Who appends what"). An
// append whose outcome is unknown (PostgreSQL did not answer) counts as
// failed: its jobs go back to the queues, and if it did commit, the fold
// makes them held by an executor that never had them until their lease
// runs out (expiry is step 4's).
func (l *Leader) Claim(ctx context.Context, p ClaimParams) ([]ClaimedJob, error) {
	l.claims.Lock() // the claims' lane: a batch of reports may be in flight meanwhile (Leader.claims)
	defer l.claims.Unlock()
	if err := l.lockLed(ctx); err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	if p.ClaimID != "" {
		key := ClaimKey{Instance: Instance{Executor: p.Executor, Instance: p.Instance}, Claim: p.ClaimID}
		if refs := l.state.ClaimedBy(key); len(refs) > 0 {
			return l.claimed(ctx, refs, nil)
		}
	}
	if p = l.claimParams(p); p.Limit <= 0 {
		return nil, nil
	}
	cur := l.state.Cursor
	picked := l.queues.Claim(p, &cur, l.Now().UnixMicro())
	if len(picked) == 0 {
		return nil, nil
	}
	refs, items := claimedItems(l.state, p, picked)
	// Whatever happens next, the reservations end: the jobs the row made
	// scheduled leave the queues by the fold, the others go back. (The
	// reservations keep them from whatever folds or reads the queues
	// while the lock is let go over the append's round trip.)
	defer func() { l.queues.Release(l.Now().UnixMicro(), refs...) }()
	if l.cfg.BeforeClaimAppend != nil {
		l.cfg.BeforeClaimAppend()
	}
	read, err := l.appendLaned(ctx, []batch{{kind: Claimed, items: items}})
	if err != nil {
		return nil, err
	}
	if err := l.fold(ctx, read); err != nil {
		return nil, err
	}
	return l.claimed(ctx, refs, items)
}

// claimParams completes p from the state, as a claim reads it: its limit
// bounded by what its instance may still hold, the limits in force and
// the shares. Called with l.mu held.
func (l *Leader) claimParams(p ClaimParams) ClaimParams {
	if p.MaxHeld > 0 {
		p.Limit = min(p.Limit, p.MaxHeld-len(l.state.Held[Instance{Executor: p.Executor, Instance: p.Instance}]))
	}
	p.Limits = l.state.Limits(p.ConcurrencyLimits, p.TaskCaps)
	p.Shares = nil
	if byTime := l.cfg.Fairness == fairness.ByTime; byTime || l.state.Shares.Weighted() {
		p.Shares = fairness.SharesOf(l.state.Shares, byTime)
	}
	return p
}

// claimedItems are the claimed row's items for the jobs a claim picked
// from s (and their refs): each the next attempt of its job.
func claimedItems(s *State, p ClaimParams, picked []fairness.Candidate) ([]fairway.JobRef, []Item) {
	refs := make([]fairway.JobRef, len(picked))
	items := make([]Item, len(picked))
	for i, c := range picked {
		refs[i] = fairway.JobRef{Group: c.Group, ID: c.ID}
		items[i] = Item{Group: c.Group, ID: c.ID, Attempt: s.Jobs.Get(refs[i]).Attempt + 1, Executor: p.Executor, Instance: p.Instance, Charge: c.Charge, Claim: p.ClaimID}
	}
	return refs, items
}

// claimed are the jobs refs that the claim's items (nil: a claim sent
// again, whose jobs are held already) made scheduled, with their
// arguments. Called with l.mu held and the claims' lane, which it lets go
// of over the read of the arguments.
func (l *Leader) claimed(ctx context.Context, refs []fairway.JobRef, items []Item) ([]ClaimedJob, error) {
	var out []ClaimedJob
	var at []submittedAt
	for i, ref := range refs {
		j := l.state.Jobs.Get(ref)
		if j == nil || (items != nil && (j.State() != fairway.StateScheduled || !j.heldBy(items[i]))) {
			continue // not this claim's: the fold decided otherwise
		}
		out = append(out, ClaimedJob{Ref: ref, Task: j.Task, Priority: j.Priority(), Attempt: j.Attempt, Retries: int32(j.Retries), MaxRetries: int32(j.MaxRetries)})
		at = append(at, submittedAt{row: j.Row(), index: j.Index()})
	}
	if err := l.readArgs(ctx, out, at); err != nil {
		return nil, err
	}
	return out, nil
}

// submittedAt is where a job's submission is: its row and its index there.
type submittedAt struct {
	row   int64
	index int32
}

// readArgs fills the jobs' arguments from the rows that submitted them
// (at: where each job's submission is), in one read made without the
// lock, and keeps what the jobs' records will need of their submissions
// while they are held (Leader.heldSubs). Called with l.mu held and the
// claims' lane: nothing else may end or release the jobs of a claim in
// progress (their executor does not know them yet, and every other
// append waits for the lane).
func (l *Leader) readArgs(ctx context.Context, jobs []ClaimedJob, at []submittedAt) error {
	if len(jobs) == 0 {
		return nil
	}
	want := wantedItems{}
	for _, a := range at {
		want.add(a.row, a.index)
	}
	call, cancel := bounded(ctx, l.cfg.CallTimeout)
	defer cancel()
	submitted, err := l.submittedRows(call, want)
	if err != nil {
		err = answered(call, err)
		l.Observe(err)
		return fmt.Errorf("reading the claimed jobs' arguments: %w", err)
	}
	for i := range jobs {
		row := submitted[at[i].row]
		sub, ok := row.items[at[i].index]
		if !ok {
			return fmt.Errorf("journal row %d holds no item %d (job %s/%s)", at[i].row, at[i].index, jobs[i].Ref.Group, jobs[i].Ref.ID)
		}
		sub.Args = slices.Clone(sub.Args) // not the row's body, which it would keep
		jobs[i].Args, jobs[i].Submission, jobs[i].Submitted = sub.Args, sub, submittedTime(row.at, at[i].index, sub)
		l.heldSubs[jobs[i].Ref] = heldSubmission{at: row.at, item: sub}
	}
	return nil
}
