package journal

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/fairwayhq/fairway"
)

// Counts returns the partition's unfinished jobs counted by group, task
// and state, the limit largest counts (all with limit 0), of one group or
// of every group (""), each with how long the oldest due waiting or stuck
// job of its group and task has been due at now (0: none is due). They
// are for the gauges (fairway_jobs) and the stats, read from the state
// (State.Counts, kept by the fold) after a fold of every row committed
// before the call, with no walk of the jobs: the oldest due job of a
// group and task is the first of its lists in the leader's queues (the
// next its claims would take), and its due time is the later of its
// submission's (its row's, read from PostgreSQL) and the time it was
// delayed or retried to. (So the oldest is the first in the claims'
// order, not always the one due longest: a job delayed to an earlier time
// than an older job's own may be due longer.)
func (l *Leader) Counts(ctx context.Context, group string, limit int, now time.Time) ([]fairway.QueueCount, error) {
	type key struct {
		group, task string
		state       fairway.State
	}
	type head struct{ row, runAt int64 }
	nowUS := now.UnixMicro()
	if err := l.lockFolded(ctx); err != nil {
		return nil, err
	}
	out := make([]fairway.QueueCount, 0, len(l.state.Counts))
	for k, n := range l.state.Counts {
		if group == "" || k.Group == group {
			out = append(out, fairway.QueueCount{Group: k.Group, Task: k.Task, State: k.State, Jobs: int64(n)})
		}
	}
	heads := map[key][]head{}
	var rows []int64
	for name, g := range l.queues.groups {
		if group != "" && name != group {
			continue
		}
		for list := range g.lists {
			for task, h := range g.lists[list] {
				if e, ok := l.queues.head(name, h, list, nowUS); ok {
					j := l.state.Jobs.Get(fairway.JobRef{Group: name, ID: e.id})
					k := key{name, task, j.State()} // waiting, or stuck (listStuck)
					heads[k] = append(heads[k], head{j.Row(), j.RunAt})
					rows = append(rows, j.Row())
				}
			}
		}
	}
	l.mu.Unlock()

	slices.SortFunc(out, func(a, b fairway.QueueCount) int {
		return cmp.Or(cmp.Compare(b.Jobs, a.Jobs), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Task, b.Task), cmp.Compare(a.State, b.State))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	at, err := rowTimes(ctx, l.db, rows)
	if err != nil {
		return nil, fmt.Errorf("reading when the oldest jobs were submitted: %w", err)
	}
	for i := range out {
		if out[i].State != fairway.StateWaiting && out[i].State != fairway.StateStuck {
			continue
		}
		due := int64(0)
		for _, h := range heads[key{out[i].Group, out[i].Task, out[i].State}] {
			if d := max(at[h.row], h.runAt); due == 0 || d < due {
				due = d
			}
		}
		if due != 0 && due <= nowUS {
			out[i].OldestDueSeconds = float64(nowUS-due) / 1e6
		}
	}
	return out, nil
}

// rowTimes are the times (µs since the Unix epoch) of the journal's rows
// ids, by id.
func rowTimes(ctx context.Context, db Querier, ids []int64) (map[int64]int64, error) {
	out := make(map[int64]int64, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := db.Query(ctx, `SELECT id, at FROM fairway_journal WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		out[id] = at.UnixMicro()
	}
	return out, rows.Err()
}

// LiveOf counts the unfinished jobs of each of groups (State.Live) as of
// now: as Jobs, it first folds every row committed before the call, so
// that jobs stored past this coordinator (by another, or by an
// application's transaction: store.InsertTx) count at once.
func (l *Leader) LiveOf(ctx context.Context, groups []string) (map[string]int, error) {
	out := make(map[string]int, len(groups))
	if err := l.lockFolded(ctx); err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	for _, g := range groups {
		out[g] = l.state.Live[g]
	}
	return out, nil
}

// HeldCounts are the jobs executors hold now per task and per group
// (State.HeldTasks, HeldGroups: what the concurrency limits bound), as of
// every row committed before the call (a fold first), in copies.
func (l *Leader) HeldCounts(ctx context.Context) (tasks, groups map[string]int, err error) {
	if err := l.lockFolded(ctx); err != nil {
		return nil, nil, err
	}
	defer l.mu.Unlock()
	return maps.Clone(l.state.HeldTasks), maps.Clone(l.state.HeldGroups), nil
}

// StatsSet is a set of unfinished jobs' intervals for the stats' series
// (store.StatsLive), summed together: N intervals of Group's jobs,
// running (from their start) or waiting (from their due time: submitted,
// or the time they were delayed or retried to), to their start or now,
// clipped to the window, whose starts fall in bucket BS and ends in
// bucket BE; SumS and SumE are the sums of their starts and ends, in
// seconds from the window's start.
type StatsSet struct {
	Group      string
	Running    bool
	BS, BE     int32
	N          int64
	SumS, SumE float64
}

// HeldStart is a started job an executor holds, for the stats' wait and
// run times: its task, start and due time (µs since the Unix epoch).
type HeldStart struct {
	Task         string
	Started, Due int64
}

// LiveStats returns what the stats add of the partition's unfinished
// jobs (of group, or of every group: ""), which fairway_job does not
// hold: the sets of the intervals of the jobs waiting (waiting, stuck, or
// scheduled and not started) and running (started), over the window from
// since to now in buckets of bucket, and the started jobs held. A due
// time since a job's submission is its row's time, which the state does
// not keep: a first walk of the jobs under the state's lock (after a
// fold) gathers their rows, their times are read without the lock, and a
// second walk sums the intervals (a job submitted in between is due now:
// it waited no time yet).
func (l *Leader) LiveStats(ctx context.Context, group string, since, now time.Time, bucket time.Duration) ([]StatsSet, []HeldStart, error) {
	if err := l.lockFolded(ctx); err != nil {
		return nil, nil, err
	}
	seen := map[int64]struct{}{}
	for ref, j := range l.state.Jobs.All() {
		if (group == "" || ref.Group == group) && j.State() != fairway.StatePending {
			seen[j.Row()] = struct{}{}
		}
	}
	l.mu.Unlock()
	at, err := rowTimes(ctx, l.db, slices.Collect(maps.Keys(seen)))
	if err != nil {
		return nil, nil, fmt.Errorf("reading when the jobs were submitted: %w", err)
	}

	sum := newSetSum(since, now, bucket)
	add := sum.add
	nowUS := now.UnixMicro()
	var held []HeldStart
	l.mu.RLock()
	for ref, j := range l.state.Jobs.All() {
		if (group != "" && ref.Group != group) || j.State() == fairway.StatePending {
			continue
		}
		due := j.RunAt
		if t, ok := at[j.Row()]; ok {
			due = max(due, t)
		} else {
			due = max(due, nowUS) // submitted since the first walk
		}
		if j.State() == fairway.StateRunning && j.Holder != nil && j.Holder.Started != 0 {
			add(ref.Group, false, due, j.Holder.Started)
			add(ref.Group, true, j.Holder.Started, nowUS)
			held = append(held, HeldStart{Task: j.Task, Started: j.Holder.Started, Due: due})
			continue
		}
		add(ref.Group, false, due, nowUS)
	}
	l.mu.RUnlock()
	return sum.sets(), held, nil
}

// Interval is an interval of a group's job for the stats' series: running
// from its start, or waiting from its due time, to To; µs since the Unix
// epoch.
type Interval struct {
	Group    string
	Running  bool
	From, To int64
}

// SumIntervals sums intervals into StatsSets over the window from since
// to now in buckets of bucket, as LiveStats sums the jobs' (for tests).
func SumIntervals(intervals []Interval, since, now time.Time, bucket time.Duration) []StatsSet {
	sum := newSetSum(since, now, bucket)
	for _, iv := range intervals {
		sum.add(iv.Group, iv.Running, iv.From, iv.To)
	}
	return sum.sets()
}

// setSum sums intervals into StatsSets.
type setSum struct {
	since, now int64 // µs
	bucket     float64
	sums       map[setKey]*StatsSet
}

type setKey struct {
	group   string
	running bool
	bs, be  int32
}

func newSetSum(since, now time.Time, bucket time.Duration) *setSum {
	return &setSum{since: since.UnixMicro(), now: now.UnixMicro(), bucket: bucket.Seconds(), sums: map[setKey]*StatsSet{}}
}

// add adds the interval from to to (µs), clipped to the window.
func (m *setSum) add(group string, running bool, from, to int64) {
	s, e := float64(max(from, m.since)-m.since)/1e6, float64(min(to, m.now)-m.since)/1e6
	if e <= s {
		return
	}
	k := setKey{group, running, int32(math.Floor(s / m.bucket)), int32(math.Floor(e / m.bucket))}
	set := m.sums[k]
	if set == nil {
		set = &StatsSet{Group: group, Running: running, BS: k.bs, BE: k.be}
		m.sums[k] = set
	}
	set.N++
	set.SumS += s
	set.SumE += e
}

func (m *setSum) sets() []StatsSet {
	out := make([]StatsSet, 0, len(m.sums))
	for _, set := range m.sums {
		out = append(out, *set)
	}
	return out
}

// Running is a running job's group and start (µs since the Unix epoch).
type Running struct {
	Group   string
	Started int64
}

// RunningJobs are the partition's running jobs, as of now (a fold first),
// found among the held jobs only (State.Held), never among the waiting
// ones.
func (l *Leader) RunningJobs(ctx context.Context) ([]Running, error) {
	if err := l.lockFolded(ctx); err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	var out []Running
	for _, refs := range l.state.Held {
		for ref := range refs {
			if j := l.state.Jobs.Get(ref); j != nil && j.State() == fairway.StateRunning && j.Holder != nil && j.Holder.Started != 0 {
				out = append(out, Running{Group: ref.Group, Started: j.Holder.Started})
			}
		}
	}
	return out, nil
}

// Eligible is the weight of the groups that have waiting or stuck jobs
// of tasks (each group counted once, at its weight in the book), of
// granted only when it is not nil: what competes in this partition for
// an executor of those tasks (fairness.Spread, over partitions). Jobs
// not due yet, and groups held back by a limit, count: a claim that
// hands fewer than asked says so. Called under the leader's lock
// (Leader.Follow).
func (s *State) Eligible(tasks, granted []string) float64 {
	seen := map[string]bool{}
	var w float64
	for k, n := range s.Counts {
		if n <= 0 || seen[k.Group] || (k.State != fairway.StateWaiting && k.State != fairway.StateStuck) ||
			!slices.Contains(tasks, k.Task) || (granted != nil && !slices.Contains(granted, k.Group)) {
			continue
		}
		seen[k.Group] = true
		w += s.Shares.Weight(k.Group)
	}
	return w
}
