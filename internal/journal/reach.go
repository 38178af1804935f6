package journal

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnreachable is the answer of a claim, a batch of reports or a verb
// while the partition's PostgreSQL could not be reached at the leader's
// last try (LeaderConfig.Unreachable): nothing was tried. The leader
// tries again at its probes, so the partition comes back within a lease
// renewal (Renew) of its database.
var ErrUnreachable = errors.New("journal: the partition's PostgreSQL could not be reached at the last try; tried again within half a second")

// ErrNoAnswer is the error of a call to the partition's database that
// got no answer within LeaderConfig.CallTimeout: its primary's processes
// frozen, or its host cut off while the connection lingers (TCP's
// keep-alives find a host gone, not one whose kernel answers for a frozen
// process). The leader takes the database for unreachable (Observe).
var ErrNoAnswer = errors.New("journal: the partition's PostgreSQL did not answer in time")

// bounded is ctx bounded by d, for one call to the database.
func bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, ErrNoAnswer)
}

// Bound is ctx bounded by the leader's CallTimeout, for a call to the
// partition's database made beside the leader (a submission): Answered
// then says whether it ran out.
func (l *Leader) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return bounded(ctx, l.cfg.CallTimeout)
}

// Answered is answered, for a call made with ctx from Bound.
func Answered(ctx context.Context, err error) error { return answered(ctx, err) }

// answered is err, the outcome of a call made with ctx (from bounded),
// saying ErrNoAnswer when the bound ran out first.
func answered(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), ErrNoAnswer) && !errors.Is(err, ErrNoAnswer) {
		return fmt.Errorf("%w (%w)", ErrNoAnswer, err)
	}
	return err
}

// stallAfter is how long a call to the database made holding the state's
// lock (a fold, a snapshot) may wait before the partition is Stalled.
const stallAfter = 250 * time.Millisecond

// Stalled says whether a call to the partition's database made holding
// the state's lock has waited longer than stallAfter: View, Follow and
// every append wait behind it, so a coordinator leaves the partition out
// of what must not wait (a dispatch request asking the partitions at
// once) until it ends. A fold takes a millisecond or a few.
func (l *Leader) Stalled() bool {
	since := l.lockedCall.Load()
	return since != 0 && time.Since(time.Unix(0, since)) > stallAfter
}

// callLocked marks a call to the database made holding the lock, until
// the function it returns is called (a call within another leaves the
// outer one's mark).
func (l *Leader) callLocked() func() {
	if !l.lockedCall.CompareAndSwap(0, time.Now().UnixNano()) {
		return func() {}
	}
	return func() { l.lockedCall.Store(0) }
}

// wholeState is how many times CallTimeout a restore or a snapshot may
// take: each reads or writes the whole state.
const wholeState = 6

// Reachable says whether the partition's database answered the last call
// the leader observed (Observe): a coordinator asks of the partitions it
// leads only those it can reach, so that one whose database is down holds
// back none of the others (a read of its state would wait behind its
// leader's try to connect).
func (l *Leader) Reachable() bool { return !l.unreachable.Load() }

// Observe takes note of the outcome of a call to the partition's
// database: nil says it answered; an error LeaderConfig.Unreachable says
// is unreachability marks it unreachable, until a probe of the leader's
// is answered (its poll, backed off from Poll to Renew, and the lease's
// renewals). Until then claims, reports, hand-overs and the verbs fail at
// once with ErrUnreachable, rather than each trying to connect: a
// database that refuses connections still costs an authentication each,
// and every try held the leader's lock, and with it the dispatch of every
// partition, behind it. Other errors change nothing.
func (l *Leader) Observe(err error) {
	switch {
	case err == nil:
		// Read first: the usual call, the database answering, writes
		// nothing shared.
		if l.unreachable.Load() && l.unreachable.Swap(false) {
			l.cfg.Logger.Info("the journal partition's PostgreSQL answers again")
		}
	case errors.Is(err, ErrNoAnswer), l.cfg.Unreachable != nil && l.cfg.Unreachable(err):
		if !l.unreachable.Swap(true) {
			l.cfg.Logger.Warn("the journal partition's PostgreSQL cannot be reached: tried again at the leader's probes only", "error", err)
		}
	}
}

// probe says whether Run's loop may read the journal now: always while
// the database is reachable; while it is not, at gaps doubling from Poll
// to Renew. Run's goroutine only.
func (l *Leader) probe(now time.Time) bool {
	if l.Reachable() {
		l.probeGap = 0
		return true
	}
	if now.Before(l.probeAt) {
		return false
	}
	l.probeGap = min(max(2*l.probeGap, l.cfg.Poll), l.cfg.Renew)
	l.probeAt = now.Add(l.probeGap)
	return true
}
