package journal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoHandOver is HandOver's answer when a hand-over would not be what
// a claim does, or cannot be made in one transaction: nothing was
// stored, and the submissions go the usual way (Submit, then a claim).
var ErrNoHandOver = errors.New("journal: no hand-over")

// HandOver stores items (one submission batch) as one submitted row and,
// in the same transaction, claims for p's executor instance the jobs that
// Claim would pick once that row is folded, with one commit: the way an
// idle system starts a job in one round trip to PostgreSQL where the
// usual way takes three (the submission's commit, the leader's read of
// it, the claim's commit).
//
// It hands over only what Claim would take: when no job of the state
// (read to the tail first when a Wake announced rows it may not hold) is
// claimable for p (its executor is idle for certain, whatever ingest
// believed), and with no concurrency or rate limits in force (the picks
// are then made from the new jobs alone, by Queues.Claim itself, on a
// state that holds only them and the state's pauses, trackers and
// cursor; weights and time shares are read from the state's book). Else,
// or when items name dependencies, hold an id twice or more than a row
// holds, or an id is taken already (the insert of the ids refuses it,
// and nothing is committed), ErrNoHandOver, and nothing was stored.
//
// stored says whether the submitted row was committed (then every item
// made its job: no id was taken). The claimed jobs are those the fold of
// the claimed row made scheduled for p, with their arguments, as Claim
// returns them: none when the claimed row was fenced (another leads:
// the submissions are stored all the same, the successor runs them), or
// when the fold did not reach it yet (an older transaction still open):
// the claim's id then finds them (Claim with p.ClaimID).
func (l *Leader) HandOver(ctx context.Context, items []Item, p ClaimParams) (stored bool, claimed []ClaimedJob, err error) {
	if len(items) == 0 || len(items) > maxRowItems {
		return false, nil, ErrNoHandOver
	}
	seen := make(map[fairway.JobRef]bool, len(items))
	for _, it := range items {
		ref := fairway.JobRef{Group: it.Group, ID: it.ID}
		if len(it.Waits) > 0 || seen[ref] {
			return false, nil, ErrNoHandOver
		}
		seen[ref] = true
	}
	l.claims.Lock() // the claims' lane, as Claim's
	defer l.claims.Unlock()
	if err := l.lockLed(ctx); err != nil {
		return false, nil, err
	}
	defer l.mu.Unlock()
	if wakes := l.wakes.Load(); wakes != l.readTo.Load() {
		// A submission committed before may not be folded yet: read it
		// first, or the picks, made from the batch alone, pass over its
		// jobs (a group's later job started before its earlier one, seen
		// at an executor's max-concurrent of one).
		if err := l.fold(ctx, nil); err != nil {
			l.Observe(err)
			return false, nil, ErrNoHandOver
		}
		l.readTo.Store(wakes)
	}
	refs, claimItems, ok := l.handOverPicks(items, p)
	if !ok {
		return false, nil, ErrNoHandOver
	}
	body, err := Encode(items)
	if err != nil {
		return false, nil, err
	}
	claimBody, err := Encode(claimItems)
	if err != nil {
		return false, nil, err
	}
	queue, epoch := l.tail.QueueLater(), l.lease.Epoch
	l.mu.Unlock() // over the round trip, as a claim's append
	call, cancel := bounded(ctx, l.cfg.CallTimeout)
	read, err := submitHanded(call, l.db, l.cfg.Partition, epoch, items, body, claimBody, queue)
	err = answered(call, err)
	cancel()
	l.mu.Lock()
	switch {
	case errors.Is(err, ErrNoHandOver):
		return false, nil, err
	case errors.Is(err, ErrFenced): // its submissions are stored all the same
		l.refused(1)
		return true, nil, nil
	case err != nil:
		l.unsure = true
		l.Observe(err)
		return false, nil, err
	}
	// Stored whatever follows: the submissions are acknowledged, and the
	// claim's id finds its jobs once folded (Claim with p.ClaimID). The
	// catch-up publishes their events, and wakes the requests for the
	// batch's jobs not handed over (and reads the tail, if this fold
	// could not).
	if err := l.fold(ctx, read); err != nil {
		l.Wake()
		l.cfg.Logger.Warn("reading the journal after a hand-over; its jobs go to the executor's next request", "error", err)
		return true, nil, nil
	}
	l.wakeToPublish()
	claimed, err = l.claimed(ctx, refs, claimItems)
	if err != nil {
		l.cfg.Logger.Warn("reading the arguments of jobs handed over; they go to the executor's next request", "error", err)
		return true, nil, nil
	}
	return true, claimed, nil
}

// handOverPicks are the jobs Claim would pick for p from items once they
// are folded, if the state holds no job claimable for p and no limits are
// in force (ok false otherwise): Queues.Claim on a state that holds only
// items, with the state's pauses, the trackers items name and the
// cursor, with p completed as a claim completes it. Called with l.mu held
// and the claims' lane.
func (l *Leader) handOverPicks(items []Item, p ClaimParams) ([]fairway.JobRef, []Item, bool) {
	if p.ClaimID != "" && len(l.state.ClaimedBy(ClaimKey{Instance: Instance{Executor: p.Executor, Instance: p.Instance}, Claim: p.ClaimID})) > 0 {
		return nil, nil, false // a request sent again: Claim answers it
	}
	if len(p.ConcurrencyLimits) > 0 || !l.state.Rates.Empty() {
		return nil, nil, false
	}
	if p = l.claimParams(p); p.Limit <= 0 {
		return nil, nil, false
	}
	now := l.Now().UnixMicro()
	tasks, capped := p.Tasks, []string(nil)
	if p.Limits != nil {
		tasks, capped = p.Limits.Open(tasks)
	}
	if len(tasks) == 0 || len(l.queues.Walk(l.state.Cursor.Group, 1, tasks, capped, p.Groups, now)) > 0 {
		return nil, nil, false // the state has work for p: a claim takes it first
	}
	scratch := NewState()
	scratch.Paused = l.state.Paused // read only: a submitted row does not pause
	for _, it := range items {
		if it.Tracker == "" {
			continue
		}
		key := fairway.JobRef{Group: it.Group, ID: it.Tracker}
		if holder, held := l.state.Trackers[key]; held {
			scratch.Trackers[key] = holder // refused by the fold as by the state's
		}
	}
	// The row's id is not known before its insert: the jobs' ages among
	// themselves are their places in it, and no other job is compared.
	if _, err := scratch.apply(Row{ID: math.MaxInt32, Kind: Submitted, At: time.UnixMicro(now)}, items); err != nil {
		return nil, nil, false
	}
	cur := l.state.Cursor
	picked := NewQueues(scratch, now).Claim(p, &cur, now)
	if len(picked) == 0 {
		return nil, nil, false
	}
	refs, claimItems := claimedItems(scratch, p, picked)
	return refs, claimItems, true
}

// submitHanded takes the ids of items (refusing a taken one: ErrNoHandOver,
// nothing committed), appends body as a submitted row (epoch 0, as any
// coordinator's) and claimBody as a claimed row fenced by epoch, in one
// transaction sent in one round trip with the read of the tail queued
// after its commit. ErrFenced when the claimed row was refused (the rest
// is committed).
func submitHanded(ctx context.Context, q Querier, partition int16, epoch int64, items []Item, body, claimBody []byte,
	queue func(*pgx.Batch) *TailRead) (*TailRead, error) {
	var tag pgconn.CommandTag
	committed := false
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SELECT pg_advisory_xact_lock_shared($1, $2)", leaseLockClass, int32(partition))
	queueFresh(b, partition, items, [][]byte{body})
	b.Queue(appendFencedSQL, partition, epoch, Claimed, [][]byte{claimBody}).Exec(func(ct pgconn.CommandTag) error {
		tag = ct
		return nil
	})
	b.Queue("COMMIT").Exec(func(pgconn.CommandTag) error { committed = true; return nil })
	read := queue(b)
	if err := sendOwnTx(ctx, q, b); err != nil && !committed {
		if idTaken(err) {
			return nil, ErrNoHandOver
		}
		return nil, fmt.Errorf("handing over %d submissions: %w", len(items), err)
	}
	if tag.RowsAffected() == 0 {
		return read, ErrFenced
	}
	return read, nil
}
