package journal

import (
	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
)

// ClaimParams is what one claim from the leader's memory asks for.
type ClaimParams struct {
	// Executor and Instance are who claims (Leader.Claim): the claimed
	// attempts are held by that instance.
	Executor, Instance string
	// Limit is how many jobs, at most.
	Limit int
	// ClaimID is the dispatch request's id ("": none). A request sent
	// again under the same id (its answer was lost) gets the jobs it
	// claimed that its instance still holds, and claims no more; the id
	// is in the claimed row, so a new leader answers it the same.
	ClaimID string
	// MaxHeld bounds the jobs the instance holds at once, these included
	// (0: no bound): Leader.Claim takes at most what it has room for
	// (the dispatcher's bound: ten jobs a registered slot).
	MaxHeld int
	// Tasks are the tasks the executor runs.
	Tasks []string
	// Groups are the groups its credential grants (nil: every group).
	Groups []string
	// Scheme is the counting scheme of priorities.
	Scheme fairway.CountingScheme
	// Limits are the concurrency and rate limits in force, with the
	// executor's own caps (nil: none). Leader.Claim makes them from its
	// state (State.Limits) with ConcurrencyLimits and TaskCaps.
	Limits *fairness.Limits
	// Shares are the groups' weighted shares, of jobs or of time (nil:
	// every weight 1, counting jobs: the round-robin alone). Leader.Claim
	// makes them from its state's book.
	Shares *fairness.Shares
	// ConcurrencyLimits are the cluster's concurrency limits as operators
	// set them, and TaskCaps the executor's own caps per task: what
	// Leader.Claim makes Limits of.
	ConcurrencyLimits []fairway.Limit
	TaskCaps          map[string]int
}

// sharesWalk is how many groups a claim with shares walks at least: the
// next job goes to the least virtual time among them.
const sharesWalk = 32

// maxClaimRounds bounds the rounds of one claim: a round picks from the
// candidates it read, and another reads on when the next pick depends on
// jobs it did not read.
const maxClaimRounds = 8

// Claim picks up to p.Limit jobs by the fair-selection rules
// (internal/fairness), moving cur on, in rounds (docs/journal.md,
// step 3). The jobs picked are reserved: no claim picks them again until
// Release, or until the fold of the leader's claimed row makes them
// scheduled. With p.Shares, each job picked carries its charge
// (fairness.Candidate.Charge), which p.Shares counts for the rest of the
// claim and the fold of the claimed row writes in the state's book.
func (q *Queues) Claim(p ClaimParams, cur *fairness.Cursor, now int64) []fairness.Candidate {
	q.Due(now)
	tasks, lim := p.Tasks, p.Limits
	var capped []string
	rounds := maxClaimRounds
	if lim != nil {
		rounds += len(p.Tasks)
		if tasks, capped = lim.Open(tasks); len(tasks) == 0 {
			return nil
		}
	}
	walkN := p.Limit
	if p.Shares != nil {
		walkN = max(p.Limit, sharesWalk)
	}
	groups := q.Walk(cur.Group, walkN, tasks, capped, p.Groups, now)
	var picked []fairness.Candidate
	for round := 1; ; round++ {
		limit := p.Limit - len(picked)
		if len(groups) == 0 {
			return picked
		}
		if lim != nil && !lim.Rates.Empty() {
			// The buckets the walked groups' jobs count against, as of
			// now, read once a round.
			q.s.Rates.Fill(lim.Rates, lim.Rates.Unread(groups, p.Tasks), now)
		}
		var got []fairness.Candidate
		var more bool
		if p.Shares != nil {
			// Any group may take every slot: its virtual time decides.
			share := make([]int32, len(groups))
			for i := range share {
				share[i] = int32(limit) //nolint:gosec // G115: a claim's limit is a dispatch request's slots, at most 10,000
			}
			got, more = fairness.PickShares(q.Candidates(groups, share, tasks, now), limit, p.Scheme, cur, lim, p.Shares)
		} else {
			got, more = fairness.Pick(q.Candidates(groups, fairness.Split(limit, len(groups)), tasks, now), limit, len(groups) == limit, p.Scheme, cur, lim)
		}
		for _, c := range got {
			q.reserve(fairway.JobRef{Group: c.Group, ID: c.ID})
		}
		picked = append(picked, got...)
		if lim != nil {
			tasks, capped = lim.Open(tasks)
		}
		if !more || (len(got) == 0 && lim == nil) || len(got) == limit || round == rounds || len(tasks) == 0 {
			return picked
		}
		next := limit - len(got)
		if p.Shares != nil {
			next = max(next, sharesWalk)
		}
		groups = q.Walk(cur.Group, next, tasks, capped, p.Groups, now)
	}
}

// reserve keeps a picked job from every claim until Release.
func (q *Queues) reserve(ref fairway.JobRef) {
	if q.reserved == nil {
		q.reserved = map[fairway.JobRef]struct{}{}
	}
	q.reserved[ref] = struct{}{}
}

// Release ends the reservation of the jobs a claim picked, once its row
// is folded (they are scheduled now) or its append failed (they are put
// back in their lists, if still claimable).
func (q *Queues) Release(now int64, refs ...fairway.JobRef) {
	for _, ref := range refs {
		delete(q.reserved, ref)
		q.Update(ref, now)
	}
}
