package journal

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fairwayhq/fairway"
)

// Counts returns the partition's unfinished jobs counted by group, task
// and state, the limit largest counts (all with limit 0), of one group or
// of every group (""), each with how long the oldest due waiting or stuck
// job of its group and task has been due at now (0: none is due). They
// are what the row engine's queue_counts.sql reads from fairway_job, for
// the gauges (fairway_jobs) and the quotas, read from the state this
// coordinator folded (leader or follower), without a round trip to
// PostgreSQL but for the times of the rows that submitted the oldest jobs
// due since their submission (the state keeps a job's row, not its time).
//
// As Jobs, it first folds every row committed before the call. It walks
// every unfinished job under the state's lock: folds, claims and reports
// wait meanwhile (BenchmarkCountsOfAMillion: docs/performance.md).
func (l *Leader) Counts(ctx context.Context, group string, limit int, now time.Time) ([]fairway.QueueCount, error) {
	type key struct {
		group, task string
		state       fairway.State
	}
	type count struct {
		jobs int64
		// dueAt is the earliest due time (µs) of a due job delayed to it;
		// row the earliest row of a due job due since its submission.
		dueAt, row int64
	}
	nowUS := now.UnixMicro()
	counts := map[key]*count{}
	if err := l.lockFolded(ctx); err != nil {
		return nil, err
	}
	for ref, j := range l.state.Jobs {
		if group != "" && ref.Group != group {
			continue
		}
		k := key{ref.Group, j.Task, j.State}
		c := counts[k]
		if c == nil {
			c = &count{}
			counts[k] = c
		}
		c.jobs++
		if j.State != fairway.StateWaiting && j.State != fairway.StateStuck {
			continue
		}
		switch {
		case j.RunAt == 0:
			if c.row == 0 || j.Row < c.row {
				c.row = j.Row
			}
		case j.RunAt <= nowUS:
			if c.dueAt == 0 || j.RunAt < c.dueAt {
				c.dueAt = j.RunAt
			}
		}
	}
	l.mu.Unlock()

	out := make([]fairway.QueueCount, 0, len(counts))
	var rows []int64
	for k, c := range counts {
		out = append(out, fairway.QueueCount{Group: k.group, Task: k.task, State: k.state, Jobs: c.jobs})
		if c.row != 0 {
			rows = append(rows, c.row)
		}
	}
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
		c := counts[key{out[i].Group, out[i].Task, out[i].State}]
		due := c.dueAt
		if t, ok := at[c.row]; ok && (due == 0 || t < due) {
			due = t
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

// LiveInterval is an interval of unfinished jobs of a group for the
// stats' series (store's stats_groups.sql): Jobs jobs running from From
// (their start) or waiting from From (their due time: submitted, or the
// time they were delayed or retried to) to To (their start; 0: now),
// µs since the Unix epoch.
type LiveInterval struct {
	Group    string
	Running  bool
	From, To int64
	Jobs     int
}

// HeldStart is a started job an executor holds, for the stats' wait and
// run times: its task, start and due time (µs).
type HeldStart struct {
	Task         string
	Started, Due int64
}

// LiveStats returns what the stats add of the partition's unfinished
// jobs (of group, or of every group: ""), as the row engine's stats read
// them from fairway_job: the intervals of the jobs waiting (waiting,
// stuck, or scheduled and not started) and running (started), and the
// started jobs held. As Counts, a fold first, then a walk of every
// unfinished job under the state's lock; the due times of jobs due since
// their submission are their rows' times, read after.
func (l *Leader) LiveStats(ctx context.Context, group string) ([]LiveInterval, []HeldStart, error) {
	type key struct {
		group         string
		running       bool
		row, from, to int64 // row: due since that row's time, unless from (a delay) is later
	}
	counts := map[key]int{}
	var held []HeldStart
	var heldRows []int64
	if err := l.lockFolded(ctx); err != nil {
		return nil, nil, err
	}
	for ref, j := range l.state.Jobs {
		if (group != "" && ref.Group != group) || j.State == fairway.StatePending {
			continue
		}
		started := int64(0)
		if j.Holder != nil && j.Holder.Started != 0 && j.State == fairway.StateRunning {
			started = j.Holder.Started
		}
		// Waiting from its due time to its start, or now.
		counts[key{group: ref.Group, row: j.Row, from: j.RunAt, to: started}]++
		if started != 0 {
			counts[key{group: ref.Group, running: true, from: started}]++
			held = append(held, HeldStart{Task: j.Task, Started: started, Due: j.RunAt})
			heldRows = append(heldRows, j.Row)
		}
	}
	l.mu.Unlock()

	rows := make([]int64, 0, len(counts))
	for k := range counts {
		if k.row != 0 {
			rows = append(rows, k.row)
		}
	}
	at, err := rowTimes(ctx, l.db, append(rows, heldRows...))
	if err != nil {
		return nil, nil, fmt.Errorf("reading when the jobs were submitted: %w", err)
	}
	merged := map[LiveInterval]int{}
	for k, n := range counts {
		from := k.from
		if !k.running {
			from = max(from, at[k.row])
		}
		merged[LiveInterval{Group: k.group, Running: k.running, From: from, To: k.to}] += n
	}
	out := make([]LiveInterval, 0, len(merged))
	for iv, n := range merged {
		iv.Jobs = n
		out = append(out, iv)
	}
	for i := range held {
		held[i].Due = max(held[i].Due, at[heldRows[i]])
	}
	return out, held, nil
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
			if j := l.state.Jobs[ref]; j != nil && j.State == fairway.StateRunning && j.Holder != nil && j.Holder.Started != 0 {
				out = append(out, Running{Group: ref.Group, Started: j.Holder.Started})
			}
		}
	}
	return out, nil
}
