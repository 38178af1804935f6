package journal

import (
	"errors"
	"time"
)

// ErrUnreachable is the answer of a claim, a batch of reports or a verb
// while the partition's PostgreSQL could not be reached at the leader's
// last try (LeaderConfig.Unreachable): nothing was tried. The leader
// tries again at its probes, so the partition comes back within a lease
// renewal (Renew) of its database.
var ErrUnreachable = errors.New("journal: the partition's PostgreSQL could not be reached at the last try; tried again within half a second")

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
			l.cfg.Logger.Info("the journal partition's PostgreSQL answers again", "partition", l.cfg.Partition)
		}
	case l.cfg.Unreachable != nil && l.cfg.Unreachable(err):
		if !l.unreachable.Swap(true) {
			l.cfg.Logger.Warn("the journal partition's PostgreSQL cannot be reached: tried again at the leader's probes only", "partition", l.cfg.Partition, "error", err)
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
