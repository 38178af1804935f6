package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/claim_groups.sql
	claimGroupsSQL string
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
)

// CountingScheme is Docspell's "H,L": H high-priority jobs, then L
// low-priority ones, then start over.
type CountingScheme struct{ High, Low int }

// At returns the priority the scheme asks for at position n of the global
// sequence.
func (c CountingScheme) At(n int64) fairway.Priority {
	cycle := int64(c.High + c.Low)
	if cycle <= 0 || n%cycle < int64(c.High) {
		return fairway.PriorityHigh
	}
	return fairway.PriorityLow
}

// ClaimParams says who claims how many jobs.
type ClaimParams struct {
	// Worker is the executor's app-id.
	Worker string
	// Limit is the number of free slots: at most this many jobs are claimed.
	Limit int
	// Tasks are the tasks the executor can run; only those are claimed.
	Tasks []string
	// Lease is how long the claim holds without a heartbeat.
	Lease time.Duration
	// Scheme is the counting scheme.
	Scheme CountingScheme
}

// maxClaimRounds bounds the rounds of one claim (see Claim).
const maxClaimRounds = 8

// Claim selects up to p.Limit eligible jobs fairly and marks them scheduled
// for p.Worker, in one transaction. The selection is the one that taking
// jobs one at a time would make (Docspell's rules):
//
//  1. the next group with an eligible job after the round-robin cursor;
//  2. in it, a due stuck job if any (oldest first), else the oldest waiting
//     job of the priority the counting scheme asks for, else of the other;
//  3. the cursor moves to that group, the scheme one step on.
//
// Both the cursor and the scheme's position live in fairway_fairness, whose
// row lock serialises claims, so selection stays fair with any number of
// coordinators. Candidates are locked FOR UPDATE SKIP LOCKED: no job is
// handed out twice.
func (s *Store) Claim(ctx context.Context, p ClaimParams) ([]fairway.Job, error) {
	if p.Limit <= 0 || len(p.Tasks) == 0 {
		return nil, nil
	}
	var jobs []fairway.Job
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		jobs = jobs[:0]
		var st fairness
		if err := tx.QueryRow(ctx, claimLockSQL).Scan(&st.cursor, &st.counter, nil, nil, nil); err != nil {
			return err
		}
		start := st
		// Rounds after the first are rare: they happen when a group ran out
		// of fetched candidates before the batch was full. Each round marks
		// its jobs, so the next one's queries no longer see them.
		for round := 0; round < maxClaimRounds && len(jobs) < p.Limit; round++ {
			if round > 0 {
				if _, err := tx.Exec(ctx, claimPinSQL); err != nil {
					return err
				}
			}
			picked, more, err := claimRound(ctx, tx, p, p.Limit-len(jobs), &st)
			if err != nil {
				return err
			}
			if len(picked) == 0 {
				break
			}
			marked, err := markClaimed(ctx, tx, picked, p)
			if err != nil {
				return err
			}
			jobs = append(jobs, marked...)
			if !more {
				break
			}
		}
		if st == start {
			return nil
		}
		_, err := tx.Exec(ctx, "UPDATE fairway_fairness SET last_group = $1, counter = $2 WHERE id = 1", st.cursor, st.counter)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claiming jobs for %q: %w", p.Worker, err)
	}
	return jobs, nil
}

func markClaimed(ctx context.Context, tx pgx.Tx, picked []candidate, p ClaimParams) ([]fairway.Job, error) {
	ids, prev := make([]string, len(picked)), make([]string, len(picked))
	for i, c := range picked {
		ids[i], prev[i] = c.id, string(c.state)
	}
	var jobs []fairway.Job
	batch := &pgx.Batch{}
	batch.Queue(claimUnpinSQL)
	batch.Queue(claimMarkSQL, ids, prev, p.Worker, interval(p.Lease)).Query(func(rows pgx.Rows) error {
		var err error
		jobs, err = collectJobs(rows)
		return err
	})
	err := tx.SendBatch(ctx, batch).Close()
	return jobs, err
}

type fairness struct {
	cursor  string
	counter int64
}

type candidate struct {
	id       string
	group    string
	state    fairway.State
	priority fairway.Priority
}

// groupQueue holds one group's locked candidates, best first, and whether
// each list may have more rows than were fetched.
type groupQueue struct {
	name                         string
	stuck, high, low             []candidate
	stuckMore, highMore, lowMore bool
}

// claimRound picks up to limit jobs from the candidates that one fetch can
// see. more is true when the round stopped because it could not know the
// next job without fetching again (a list or the group walk was cut off).
func claimRound(ctx context.Context, tx pgx.Tx, p ClaimParams, limit int, st *fairness) (picked []candidate, more bool, err error) {
	groups, walkCut, err := walkGroups(ctx, tx, st.cursor, limit, p.Tasks)
	if err != nil || len(groups) == 0 {
		return nil, false, err
	}
	// Each group's share if every group had enough jobs; a group that runs
	// out passes its turn on, and a list that was cut off ends the round.
	share := make([]int32, len(groups))
	for i := range limit {
		share[i%len(groups)]++
	}
	queues, err := fetchCandidates(ctx, tx, groups, share, p.Tasks)
	if err != nil {
		return nil, false, err
	}
	active := queues
	for i := 0; len(picked) < limit && len(active) > 0; {
		if i == len(active) {
			if walkCut {
				return picked, true, nil // groups after the last walked one are unknown
			}
			i = 0
		}
		q := active[i]
		c, ok, unknown := q.take(p.Scheme.At(st.counter))
		if unknown {
			return picked, true, nil
		}
		if !ok {
			active = append(active[:i:i], active[i+1:]...)
			continue
		}
		picked = append(picked, c)
		st.cursor = q.name
		st.counter++
		i++
	}
	return picked, false, nil
}

// take removes the group's next job for the priority hint. unknown is true
// when the answer depends on rows that were not fetched.
func (q *groupQueue) take(hint fairway.Priority) (c candidate, ok, unknown bool) {
	first, second := &q.high, &q.low
	firstMore, secondMore := q.highMore, q.lowMore
	if hint == fairway.PriorityLow {
		first, second = second, first
		firstMore, secondMore = secondMore, firstMore
	}
	for _, l := range []struct {
		list *[]candidate
		more bool
	}{{&q.stuck, q.stuckMore}, {first, firstMore}, {second, secondMore}} {
		if len(*l.list) > 0 {
			c = (*l.list)[0]
			*l.list = (*l.list)[1:]
			return c, true, false
		}
		if l.more {
			return c, false, true
		}
	}
	return c, false, false
}

// walkGroups lists up to limit groups with eligible jobs in round-robin
// order from the cursor, wrapping around to the first group. cut is true
// when the list stopped at limit, so more groups may follow.
func walkGroups(ctx context.Context, tx pgx.Tx, cursor string, limit int, tasks []string) (groups []string, cut bool, err error) {
	rows, err := tx.Query(ctx, claimGroupsSQL, cursor, limit, tasks)
	if err != nil {
		return nil, false, err
	}
	groups, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, err
	}
	if len(groups) < limit && cursor != "" {
		// Wrap around: the groups from the first up to the cursor itself.
		rows, err := tx.Query(ctx, claimGroupsSQL, "", limit-len(groups), tasks)
		if err != nil {
			return nil, false, err
		}
		wrapped, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, false, err
		}
		for _, g := range wrapped {
			if g > cursor {
				return groups, false, nil // back where the first walk began
			}
			groups = append(groups, g)
		}
	}
	return groups, len(groups) == limit, nil
}

// fetchCandidates locks up to share[i] jobs of each kind (due stuck, high
// waiting, low waiting) of each group, in one round trip.
func fetchCandidates(ctx context.Context, tx pgx.Tx, groups []string, share []int32, tasks []string) ([]*groupQueue, error) {
	queues := make([]*groupQueue, len(groups))
	index := make(map[string]*groupQueue, len(groups))
	for i, g := range groups {
		queues[i] = &groupQueue{name: g}
		index[g] = queues[i]
	}
	counts := map[string]map[string]int32{}
	add := func(kind string) func(pgx.Rows) error {
		return func(rows pgx.Rows) error {
			defer rows.Close()
			for rows.Next() {
				c := candidate{state: fairway.StateWaiting}
				if err := rows.Scan(&c.id, &c.group, &c.priority); err != nil {
					return err
				}
				q := index[c.group]
				switch kind {
				case "stuck":
					c.state = fairway.StateStuck
					q.stuck = append(q.stuck, c)
				case "high":
					q.high = append(q.high, c)
				default:
					q.low = append(q.low, c)
				}
				if counts[kind] == nil {
					counts[kind] = map[string]int32{}
				}
				counts[kind][c.group]++
			}
			return rows.Err()
		}
	}
	batch := &pgx.Batch{}
	batch.Queue(claimStuckSQL, groups, share, tasks).Query(add("stuck"))
	batch.Queue(claimWaitingSQL, groups, share, tasks, string(fairway.PriorityHigh)).Query(add("high"))
	batch.Queue(claimWaitingSQL, groups, share, tasks, string(fairway.PriorityLow)).Query(add("low"))
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, err
	}
	for i, q := range queues {
		q.stuckMore = counts["stuck"][q.name] == share[i]
		q.highMore = counts["high"][q.name] == share[i]
		q.lowMore = counts["low"][q.name] == share[i]
	}
	return queues, nil
}
