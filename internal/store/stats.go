package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/stats_finished.sql
	statsFinishedSQL string
	//go:embed sql/stats_times.sql
	statsTimesSQL string
	//go:embed sql/stats_groups.sql
	statsGroupsSQL string
)

// Bounds of Stats (the operator and tenant APIs check the same ones
// first: events.StatsRequest.Durations).
const (
	// StatsWindowMax caps the window: its cost grows with the jobs that
	// ended in it.
	StatsWindowMax = 31 * 24 * time.Hour
	// StatsBucketsMax caps the buckets of a window: a window of an hour
	// has minutes, of a day at most 1,440 buckets.
	StatsBucketsMax = 1440
	// statsFinishedRows caps the rows of finished counts.
	statsFinishedRows = 20000
	// statsQueueSeries caps the queue counts.
	statsQueueSeries = 1000
)

// StatsParams selects what Stats computes.
type StatsParams struct {
	// Window is how far back it looks. Defaults to an hour.
	Window time.Duration
	// Bucket is the width of a bucket: at least a second, and at most
	// StatsBucketsMax buckets in Window. Defaults to Window/60.
	Bucket time.Duration
	// Group limits it to one group; "" is every group.
	Group string
}

// StatsLive is what the journal engine's state adds to Stats: its
// unfinished jobs, which fairway_job does not hold (it keeps their
// records once they end).
type StatsLive struct {
	// Sets are the unfinished jobs' waiting and running intervals, summed
	// as stats_groups.sql sums the rows'.
	Sets []journal.StatsSet
	// Held are the started jobs executors hold.
	Held []journal.HeldStart
	// Queue are the unfinished jobs' counts (journal.Leader.Counts).
	Queue []fairway.QueueCount
}

// LiveStatsFunc gives Stats the unfinished jobs' StatsLive, the
// partition's state's, for a window from since to now (PostgreSQL's
// clock) in buckets of bucket.
type LiveStatsFunc func(ctx context.Context, since, now time.Time, bucket time.Duration) (*StatsLive, error)

// withDefaults fills p's gaps and checks it.
func (p StatsParams) withDefaults() (StatsParams, error) {
	if p.Window <= 0 {
		p.Window = time.Hour
	}
	// Bucket bounds are whole seconds (stats_groups.sql relies on it).
	p.Window = max(time.Second, p.Window.Truncate(time.Second))
	if p.Bucket <= 0 {
		p.Bucket = max(time.Second, p.Window/60)
	}
	p.Bucket = p.Bucket.Truncate(time.Second)
	switch {
	case p.Window > StatsWindowMax:
		return p, fairway.Invalid("window", "%s is longer than 31 days", p.Window)
	case p.Bucket < time.Second:
		return p, fairway.Invalid("bucket", "%s is shorter than a second", p.Bucket)
	case p.Bucket > p.Window:
		return p, fairway.Invalid("bucket", "%s is longer than the window (%s)", p.Bucket, p.Window)
	case p.Window/p.Bucket > StatsBucketsMax:
		return p, fairway.Invalid("bucket", "%s makes %d buckets of a %s window; at most %d: choose a wider bucket", p.Bucket, p.Window/p.Bucket, p.Window, StatsBucketsMax)
	}
	return p, nil
}

// Stats computes the dashboard's figures over the jobs PostgreSQL keeps
// (see fairway.Stats). It reads the jobs that ended in the window (through
// the index of final jobs) and every job not yet final: meant for a
// dashboard that asks now and then, not for a hot path.
func (s *Store) Stats(ctx context.Context, p StatsParams, liveStats LiveStatsFunc) (*fairway.Stats, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	st := &fairway.Stats{BucketSeconds: int(p.Bucket / time.Second)}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		// One snapshot for every part, and the window ends at a whole
		// bucket so that buckets line up from one call to the next.
		if err := tx.QueryRow(ctx, dbNowSQL).Scan(&st.Now); err != nil {
			return err
		}
		end := st.Now.Truncate(p.Bucket).Add(p.Bucket)
		st.Since = end.Add(-p.Window)
		for t := st.Since; t.Before(end); t = t.Add(p.Bucket) {
			st.Buckets = append(st.Buckets, t)
		}
		bucket := int64(p.Bucket / time.Second)
		var live *StatsLive
		if liveStats != nil {
			var err error
			if live, err = liveStats(ctx, st.Since, st.Now, p.Bucket); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, statsFinishedSQL, st.Since, bucket, p.Group, statsFinishedRows)
		if err != nil {
			return err
		}
		st.Finished, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (fairway.FinishedCount, error) {
			var f fairway.FinishedCount
			return f, row.Scan(&f.Bucket, &f.Group, &f.Task, &f.State, &f.Jobs)
		})
		if err != nil {
			return err
		}
		var heldTasks []string
		var heldStarted, heldDue []time.Time
		if live != nil {
			for _, h := range live.Held {
				heldTasks = append(heldTasks, h.Task)
				heldStarted, heldDue = append(heldStarted, time.UnixMicro(h.Started)), append(heldDue, time.UnixMicro(h.Due))
			}
		}
		rows, err = tx.Query(ctx, statsTimesSQL, st.Since, p.Group, heldTasks, heldStarted, heldDue)
		if err != nil {
			return err
		}
		times, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (fairway.TaskTimes, error) {
			var t fairway.TaskTimes
			var task *string
			err := row.Scan(&task, &t.Started, &t.Ended, &t.WaitP50, &t.WaitP99, &t.RunP50, &t.RunP99)
			if task != nil {
				t.Task = *task
			}
			return t, err
		})
		if err != nil {
			return err
		}
		for _, t := range times {
			if t.Task == "" {
				st.All = t
			} else {
				st.Tasks = append(st.Tasks, t)
			}
		}
		var sets liveSets
		if live != nil {
			sets = liveSetsOf(live.Sets)
		}
		rows, err = tx.Query(ctx, statsGroupsSQL, st.Since, bucket, st.Now, p.Group,
			sets.groups, sets.running, sets.bs, sets.be, sets.n, sets.sumS, sets.sumE)
		if err != nil {
			return err
		}
		byGroup := map[string]int{}
		var (
			group   string
			running bool
			b       int
			avg     float64
		)
		_, err = pgx.ForEachRow(rows, []any{&group, &running, &b, &avg}, func() error {
			i, ok := byGroup[group]
			if !ok {
				i = len(st.Groups)
				byGroup[group] = i
				st.Groups = append(st.Groups, fairway.GroupSeries{Group: group,
					Running: make([]float64, len(st.Buckets)), Waiting: make([]float64, len(st.Buckets))})
			}
			if b < 0 || b >= len(st.Buckets) {
				return nil
			}
			if running {
				st.Groups[i].Running[b] += avg
			} else {
				st.Groups[i].Waiting[b] += avg
			}
			return nil
		})
		if err != nil {
			return err
		}
		if live != nil {
			st.Queue = live.Queue[:min(len(live.Queue), statsQueueSeries)]
			return nil
		}
		rows, err = tx.Query(ctx, queueCountsSQL, statsQueueSeries, p.Group)
		if err != nil {
			return err
		}
		st.Queue, err = pgx.CollectRows(rows, scanQueueCount)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("computing stats: %w", interpretError(err))
	}
	return st, nil
}

// liveSets are StatsLive's sets in arrays for stats_groups.sql.
type liveSets struct {
	groups     []string
	running    []bool
	bs, be     []int32
	n          []int64
	sumS, sumE []float64
}

func liveSetsOf(sets []journal.StatsSet) liveSets {
	var out liveSets
	for _, t := range sets {
		out.groups, out.running = append(out.groups, t.Group), append(out.running, t.Running)
		out.bs, out.be = append(out.bs, t.BS), append(out.be, t.BE)
		out.n, out.sumS, out.sumE = append(out.n, t.N), append(out.sumS, t.SumS), append(out.sumE, t.SumE)
	}
	return out
}
