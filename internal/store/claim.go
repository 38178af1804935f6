package store

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/fairness"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/claim_cursor_save.sql
	claimCursorSaveSQL string
)

var (
	//go:embed sql/claim_walk.sql
	claimWalkSQL string
	//go:embed sql/claim_walk_groups.sql
	claimWalkGroupsSQL string
	//go:embed sql/claim_stuck.sql
	claimStuckSQL string
	//go:embed sql/claim_waiting.sql
	claimWaitingSQL string
	//go:embed sql/claim_mark.sql
	claimMarkSQL string
	//go:embed sql/claim_lock.sql
	claimLockSQL string
	//go:embed sql/claim_pin.sql
	claimPinSQL string
	//go:embed sql/claim_unpin.sql
	claimUnpinSQL string
	//go:embed sql/claim_limits.sql
	claimLimitsSQL string
	//go:embed sql/claim_held.sql
	claimHeldSQL string
)

// ClaimParams says who claims how many jobs.
type ClaimParams struct {
	// Executor is the executor's app-id.
	Executor string
	// Instance, when set, is the executor instance that asks: unless it is
	// the instance registered for Executor now, and live, the claim fails with
	// fairway.ErrNotRegistered and changes nothing. The claimed attempts
	// are recorded as held by this instance: only its reports apply.
	Instance string
	// ClaimID, when set, is the id of the dispatch request. A claim under
	// an id that already claimed jobs still scheduled returns those, with a
	// fresh lease, and claims nothing new: the executor sent the request
	// again because the answer was lost (or the first request was served
	// late, after the executor had sent it again and been answered).
	ClaimID string
	// Reclaimed, when set, is called with the number of jobs handed out
	// again under ClaimID.
	Reclaimed func(jobs int)
	// Limit is the number of free slots: at most this many jobs are claimed.
	Limit int
	// Tasks are the tasks the executor can run; only those are claimed.
	Tasks []string
	// Groups, when not nil, are the only groups whose jobs are claimed
	// (what the executor's credential grants); empty claims nothing.
	Groups []string
	// Fairness is what a group's turn is worth: FairnessJobs (the
	// default) or FairnessTime (see internal/fairness, shares.go).
	Fairness string
	// MaxHeld, when positive, caps the jobs Instance holds (scheduled or
	// running) after the claim, whatever Limit says: an executor cannot
	// gather jobs by asking again and again.
	MaxHeld int
	// Lease is how long the claim holds without a heartbeat.
	Lease time.Duration
	// Scheme is the counting scheme.
	Scheme fairway.CountingScheme
	// TaskLimits caps, per task, the jobs of it this claim may take: the
	// executor's free slots for the tasks it runs with a max-concurrent.
	// A task absent is bounded by Limit only.
	TaskLimits map[string]int
}

// reclaimSQL hands out again the jobs a dispatch request claimed that are
// still scheduled, with a fresh lease (see ClaimParams.ClaimID). It runs in
// the claim's transaction, after the fairness lock.
var (
	//go:embed sql/claim_reclaim.sql
	reclaimSQL string
)

// maxClaimRounds bounds the rounds of one claim (see Claim).
const maxClaimRounds = 8

// Claim selects up to p.Limit eligible jobs fairly and marks them scheduled
// for p.Executor, in one transaction. The selection is the one that taking
// jobs one at a time would make (Docspell's rules):
//
//  1. the next group with an eligible job after the round-robin cursor;
//  2. in it, a due stuck job if any (oldest first), else the oldest waiting
//     job of the priority the counting scheme asks for, else of the other;
//  3. the cursor moves to that group, the scheme one step on.
//
// Both the cursor and the scheme's position live in fairway_fairness, whose
// row lock serialises claims, so selection stays fair with any number of
// coordinators. Candidates are read without row locks (a lock is a write
// of its own); the marking takes a job only if it is still in the state
// the candidates' query read (a cancel or an expiry in between leaves it
// out), so no job is handed out twice.
//
// A claim costs three round trips, its statements pipelined: begin, lock
// and walk the groups; fetch the candidates; mark them, move the cursor and
// commit. A claim that needs further rounds (rare) costs two more each.
func (s *Store) Claim(ctx context.Context, p ClaimParams) ([]fairway.Job, error) {
	if p.Limit <= 0 || len(p.Tasks) == 0 || p.Groups != nil && len(p.Groups) == 0 {
		return nil, nil
	}
	if p.Groups != nil {
		// A group named twice is one group: walked twice, it would take
		// two turns of every round.
		groups := slices.Clone(p.Groups)
		slices.Sort(groups)
		p.Groups = slices.Compact(groups)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("claiming jobs for %q: %w", p.Executor, interpretError(err))
	}
	defer conn.Release()
	jobs, err := claim(ctx, conn.Conn(), p, &s.limitsInUse, &s.ratesInUse, s.maxHold)
	if err != nil {
		abandonTx(ctx, conn)
		return nil, fmt.Errorf("claiming jobs for %q: %w", p.Executor, interpretError(err))
	}
	return jobs, nil
}

func claim(ctx context.Context, conn *pgx.Conn, p ClaimParams, limitsInUse, ratesInUse *atomic.Bool, maxHold time.Duration) ([]fairway.Job, error) {
	var st fairness.Cursor
	var registered bool
	var groups []string
	var reclaimed []fairway.Job
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	var limited, weighted, rated bool
	var vclock float64
	var held int
	b.Queue(claimLockSQL, p.Executor, p.Instance).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.Group, &st.Counter, &registered, nil, nil, nil, nil, nil, &limited, &vclock, &weighted, &rated)
	})
	if p.MaxHeld > 0 {
		b.Queue(claimHeldSQL, p.Executor, p.Instance).QueryRow(func(row pgx.Row) error { return row.Scan(&held) })
	}
	if p.ClaimID != "" {
		// After the lock: a claim under this id that was in progress has
		// committed, and its jobs are seen.
		b.Queue(reclaimSQL, p.Executor, p.ClaimID, interval(p.Lease), p.Instance, interval(maxHold)).Query(func(rows pgx.Rows) error {
			var err error
			reclaimed, err = collectJobs(rows)
			return err
		})
	}
	// The limits are read in this round trip when the last claim found
	// some; else only if claim_lock says they exist now (one more round
	// trip, once): a cluster without limits pays nothing for them.
	var lim *fairness.Limits
	readLim := func(rows pgx.Rows) error {
		var err error
		lim, err = readLimits(rows, p.TaskLimits)
		return err
	}
	readRateLimits := func(rows pgx.Rows) error {
		r, err := readRates(rows)
		if lim != nil {
			lim.Rates = r
		}
		return err
	}
	queued := limitsInUse.Load()
	if queued {
		b.Queue(claimLimitsSQL).Query(readLim)
		b.Queue(claimRatesSQL).Query(readRateLimits)
	}
	// Sharing time, the walk reads more groups than the claim's slots: the
	// next job goes to the group whose virtual time is least among them.
	byTime := p.Fairness == FairnessTime
	walkN := p.Limit
	if byTime {
		walkN = max(p.Limit, sharesWalk)
	}
	queueWalk(b, p, nil, walkN, nil, &groups)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if !registered {
		// Rolled back by the caller: the cursor stays where it was.
		return nil, fairway.NotRegistered(p.Executor, p.Instance)
	}
	limitsInUse.Store(limited)
	ratesInUse.Store(rated)
	switch {
	case limited && !queued:
		b := &pgx.Batch{}
		b.Queue(claimLimitsSQL).Query(readLim)
		b.Queue(claimRatesSQL).Query(readRateLimits)
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
	case !limited:
		lim = fairness.ExecutorLimits(p.TaskLimits)
	}
	if len(reclaimed) > 0 {
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			return nil, err
		}
		slices.SortFunc(reclaimed, func(a, b fairway.Job) int {
			return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.ID, b.ID))
		})
		if p.Reclaimed != nil {
			p.Reclaimed(len(reclaimed))
		}
		return reclaimed, nil
	}
	if p.MaxHeld > 0 {
		if p.Limit = min(p.Limit, p.MaxHeld-held); p.Limit <= 0 {
			_, err := conn.Exec(ctx, "COMMIT")
			return nil, err
		}
	}
	start := st
	var jobs []fairway.Job
	rounds := maxClaimRounds
	var sh *fairness.Shares
	if byTime || weighted {
		sh = fairness.NewShares(byTime, vclock)
		walkN = max(p.Limit, sharesWalk)
	}
	rewalk := weighted && !byTime // the walk read only the claim's slots
	var capped []string
	if lim != nil {
		// Limits in force: the walk ran before they were known. Walk again
		// without the tasks and groups at their limit, if any are.
		rounds += len(p.Tasks)
		var tasks []string
		tasks, capped = lim.Open(p.Tasks)
		if len(tasks) == 0 {
			_, err := conn.Exec(ctx, "COMMIT")
			return nil, err
		}
		if len(tasks) < len(p.Tasks) || len(capped) > 0 {
			p.Tasks = tasks
			rewalk = true
		}
	}
	if rewalk {
		b := &pgx.Batch{}
		queueWalk(b, p, nil, walkN, capped, &groups)
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
	}
	for round := 1; ; round++ {
		limit := p.Limit - len(jobs)
		picked, more, err := claimRound(ctx, conn, p, limit, groups, &st, lim, sh)
		if err != nil {
			return nil, err
		}
		var capped []string
		if lim != nil {
			p.Tasks, capped = lim.Open(p.Tasks)
		}
		// A round that picked nothing while more may be eligible passed
		// jobs over for a limit (the walk leaves out what is now known to
		// be at its limit): another round, as long as rounds are left.
		last := !more || (len(picked) == 0 && lim == nil) || len(picked) == limit || round == rounds || len(p.Tasks) == 0
		b := &pgx.Batch{}
		if len(picked) > 0 {
			ids, groups, prev := make([]string, len(picked)), make([]string, len(picked)), make([]string, len(picked))
			for i, c := range picked {
				ids[i], groups[i], prev[i] = c.ID, c.Group, string(c.State)
			}
			b.Queue(claimUnpinSQL)
			b.Queue(claimMarkSQL, ids, prev, p.Executor, interval(p.Lease), p.Instance, p.ClaimID, groups).Query(func(rows pgx.Rows) error {
				marked, err := collectJobs(rows)
				jobs = append(jobs, marked...)
				return err
			})
		}
		if last {
			if st != start {
				b.Queue(claimCursorSaveSQL, st.Group, st.Counter)
			}
			saveShares(b, sh)
			if lim != nil {
				saveRates(b, lim.Rates)
			}
			b.Queue("COMMIT")
			return jobs, conn.SendBatch(ctx, b).Close()
		}
		// Another round, on the jobs the marking left.
		b.Queue(claimPinSQL)
		next := limit - len(picked)
		if sh != nil {
			next = max(next, sharesWalk)
		}
		queueWalk(b, p, st.Group, next, capped, &groups)
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
	}
}

// queueWalk queues the walk of the groups with eligible jobs, from cursor
// (nil: the saved one), at most limit, leaving capped out: every group's,
// or the granted groups' only (p.Groups).
func queueWalk(b *pgx.Batch, p ClaimParams, cursor any, limit int, capped []string, groups *[]string) {
	if p.Groups != nil {
		b.Queue(claimWalkGroupsSQL, cursor, limit, p.Tasks, capped, p.Groups).Query(collectGroups(groups))
		return
	}
	b.Queue(claimWalkSQL, cursor, limit, p.Tasks, capped).Query(collectGroups(groups))
}

func collectGroups(groups *[]string) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		var err error
		*groups, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	}
}

// claimRound picks up to limit jobs from the candidates that one fetch can
// see, given the groups walked in round-robin order (see fairness.Pick).
func claimRound(ctx context.Context, conn *pgx.Conn, p ClaimParams, limit int, groups []string, st *fairness.Cursor, lim *fairness.Limits, sh *fairness.Shares) (picked []fairness.Candidate, more bool, err error) {
	if len(groups) == 0 {
		return nil, false, nil
	}
	share := fairness.Split(limit, len(groups))
	var extra []func(*pgx.Batch)
	if sh != nil {
		// Any group may take every slot: its virtual time decides.
		for i := range share {
			share[i] = int32(limit) //nolint:gosec // G115: a claim's limit is the dispatch request's slots, at most 10,000
		}
		extra = append(extra, queueSharesRead(sh, groups, p.Tasks))
	}
	if lim != nil {
		if keys := lim.Rates.Unread(groups, p.Tasks); len(keys) > 0 {
			extra = append(extra, func(b *pgx.Batch) {
				b.Queue(claimRateBucketsSQL, keys).Query(readBuckets(lim.Rates))
			})
		}
	}
	queues, err := fetchCandidates(ctx, conn, groups, share, p.Tasks, extra...)
	if err != nil {
		return nil, false, err
	}
	if sh != nil {
		picked, more = fairness.PickShares(queues, limit, p.Scheme, st, lim, sh)
		return picked, more, nil
	}
	picked, more = fairness.Pick(queues, limit, len(groups) == limit, p.Scheme, st, lim)
	return picked, more, nil
}

// fetchCandidates reads up to share[i] jobs of each kind (due stuck, high
// waiting, low waiting) of each group, in one round trip.
func fetchCandidates(ctx context.Context, conn *pgx.Conn, groups []string, share []int32, tasks []string, extra ...func(*pgx.Batch)) ([]*fairness.Queue, error) {
	queues := make([]*fairness.Queue, len(groups))
	index := make(map[string]*fairness.Queue, len(groups))
	for i, g := range groups {
		queues[i] = &fairness.Queue{Name: g}
		index[g] = queues[i]
	}
	counts := map[string]map[string]int32{}
	add := func(kind string) func(pgx.Rows) error {
		return func(rows pgx.Rows) error {
			defer rows.Close()
			for rows.Next() {
				c := fairness.Candidate{State: fairway.StateWaiting}
				if err := rows.Scan(&c.ID, &c.Group, &c.Priority, &c.Task); err != nil {
					return err
				}
				q := index[c.Group]
				switch kind {
				case "stuck":
					c.State = fairway.StateStuck
					q.Stuck = append(q.Stuck, c)
				case "high":
					q.High = append(q.High, c)
				default:
					q.Low = append(q.Low, c)
				}
				if counts[kind] == nil {
					counts[kind] = map[string]int32{}
				}
				counts[kind][c.Group]++
			}
			return rows.Err()
		}
	}
	batch := &pgx.Batch{}
	batch.Queue(claimStuckSQL, groups, share, tasks).Query(add("stuck"))
	batch.Queue(claimWaitingSQL, groups, share, tasks, string(fairway.PriorityHigh)).Query(add("high"))
	batch.Queue(claimWaitingSQL, groups, share, tasks, string(fairway.PriorityLow)).Query(add("low"))
	for _, queue := range extra {
		queue(batch)
	}
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return nil, err
	}
	for i, q := range queues {
		q.StuckMore = counts["stuck"][q.Name] == share[i]
		q.HighMore = counts["high"][q.Name] == share[i]
		q.LowMore = counts["low"][q.Name] == share[i]
	}
	return queues, nil
}
