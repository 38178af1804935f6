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
