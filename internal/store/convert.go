package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/fairwayhq/fairway/internal/journal"
	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/convert_running.sql
	convertRunningSQL string
	//go:embed sql/convert_cancel_requested.sql
	convertCancelRequestedSQL string
	//go:embed sql/convert_unfinished_order.sql
	convertUnfinishedOrderSQL string
	//go:embed sql/convert_unfinished.sql
	convertUnfinishedSQL string
	//go:embed sql/convert_settings.sql
	convertSettingsSQL string
	//go:embed sql/convert_finish.sql
	convertFinishSQL string
	//go:embed sql/convert_release_lease.sql
	convertReleaseLeaseSQL string
)

// Converted is what ConvertToJournal moved.
type Converted struct {
	// Jobs is how many unfinished jobs moved into the journal; Running
	// how many of them an executor held (they run again).
	Jobs, Running int
	// Cancelled is how many jobs whose cancel was requested while they
	// ran ended cancelled instead.
	Cancelled int
	// Weights and Rates are the groups' weights and the rate limits
	// carried into the journal.
	Weights, Rates int
	// Took is how long the move took.
	Took time.Duration
}

// convertHolder holds the journal's lease while ConvertToJournal appends.
const convertHolder = "fairway migrate --to-journal"

// convertBatch is how many jobs each of the journal's rows carries.
const convertBatch = 10_000

// ErrCoordinatorRunning: ConvertToJournal found a coordinator running on
// the database.
var ErrCoordinatorRunning = errors.New("a coordinator runs on this database")

// ConvertToJournal moves a database of the row engine onto the journal
// engine, in one transaction: its unfinished jobs become rows of the
// journal (retried rows, so that each keeps its attempts so far and its
// submission time; the journal's leader queues them as any job), the
// groups' weights and the rate limits become the journal's weight and
// rate rows, the unfinished rows leave fairway_job_row and the ended ones
// become records (fairway_record; their log lines and every id taken
// stay), and the
// database's engine is the journal. On a new database (no engine
// recorded) it records the journal, and moves nothing. Every coordinator
// must be stopped (ErrCoordinatorRunning otherwise). What changes for the
// jobs:
//   - a job an executor held (scheduled, running) waits again, its attempt
//     counted: it runs again, and its executor's report is refused;
//   - a job whose cancel was requested while it ran ends cancelled;
//   - a job waiting for its retry (stuck) waits until its retry's time, as
//     a waiting job (not ahead of the others, as stuck jobs are);
//   - the retries counted so far start afresh, as after a retry by hand
//     (its attempts go on counting).
//
// progress, when set, is called after each row of the journal with the
// jobs moved so far.
func (s *Store) ConvertToJournal(ctx context.Context, progress func(jobs int)) (Converted, error) {
	began := time.Now()
	var out Converted
	engine, err := readEngine(ctx, s.pool)
	switch {
	case err != nil:
		return out, fmt.Errorf("reading the database's engine: %w", interpretError(err))
	case engine == EngineJournal:
		return out, errors.New("this database is on the journal engine already: nothing to move")
	case engine == "":
		// A new database: nothing to move, the journal recorded as its
		// engine (its coordinators that name none run it).
		if err := s.OpenJournal(ctx); err != nil {
			return out, err
		}
		out.Took = time.Since(began)
		return out, nil
	}
	var holder string
	var until time.Time
	err = s.pool.QueryRow(ctx, convertRunningSQL).Scan(&holder, &until)
	switch {
	case err == nil:
		return out, fmt.Errorf("%w (coordinator %s leads its maintenance until %s): stop every coordinator first; executors may keep running",
			ErrCoordinatorRunning, holder, until.UTC().Format(time.RFC3339))
	case !errors.Is(err, pgx.ErrNoRows):
		return out, fmt.Errorf("looking for a running coordinator: %w", interpretError(err))
	}
	const ttl = time.Minute
	lease, ok, err := journal.Acquire(ctx, s.pool, 0, convertHolder, ttl)
	if err != nil {
		return out, err
	}
	if !ok {
		return out, fmt.Errorf("%w: it holds the journal's lease; stop every coordinator first", ErrCoordinatorRunning)
	}
	defer func() {
		// Given up, so that the first coordinator leads at once; else it
		// runs out in a minute.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := s.pool.Exec(rctx, convertReleaseLeaseSQL, lease.Partition, convertHolder); err != nil {
			s.log.Warn("giving up the journal's lease after the move; it runs out within a minute", "error", err)
		}
	}()
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		// (The foreign key of the log lines went with migration 027: the
		// unfinished rows leave, their lines stay for the journal's jobs.)
		tag, err := tx.Exec(ctx, convertCancelRequestedSQL)
		if err != nil {
			return fmt.Errorf("cancelling the jobs whose cancel was requested: %w", err)
		}
		out.Cancelled = int(tag.RowsAffected())
		if out.Weights, out.Rates, err = convertSettings(ctx, tx, lease.Epoch, ttl); err != nil {
			return err
		}
		order, err := unfinishedOrder(ctx, tx)
		if err != nil {
			return err
		}
		for len(order) > 0 {
			chunk := order[:min(convertBatch, len(order))]
			order = order[len(chunk):]
			items, running, err := unfinishedItems(ctx, tx, chunk)
			if err != nil {
				return err
			}
			body, err := journal.Encode(items)
			if err != nil {
				return err
			}
			if err := journal.AppendFencedIdle(ctx, tx, lease.Partition, lease.Epoch, ttl, journal.Retried, body); err != nil {
				return err
			}
			out.Jobs += len(items)
			out.Running += running
			if progress != nil {
				progress(out.Jobs)
			}
		}
		if _, err := tx.Exec(ctx, convertFinishSQL); err != nil {
			return fmt.Errorf("recording the journal as the database's engine: %w", err)
		}
		if _, err := tx.Exec(ctx, moveJobRowsSQL); err != nil {
			return fmt.Errorf("moving the ended jobs into the records: %w", err)
		}
		return nil
	})
	if err != nil {
		return Converted{}, fmt.Errorf("moving the database onto the journal engine (nothing changed): %w", err)
	}
	out.Took = time.Since(began)
	return out, nil
}

// convertSettings appends the weights and the rate limits of the row
// engine's tables as the journal's weight and rate rows.
func convertSettings(ctx context.Context, tx pgx.Tx, epoch int64, ttl time.Duration) (weights, rates int, err error) {
	rows, err := tx.Query(ctx, convertSettingsSQL)
	if err != nil {
		return 0, 0, fmt.Errorf("reading the weights and rate limits: %w", err)
	}
	var weightItems, rateItems []journal.Item
	var kind, group, task string
	var value float64
	var periodMS int64
	_, err = pgx.ForEachRow(rows, []any{&kind, &group, &task, &value, &periodMS}, func() error {
		if kind == "weight" {
			weightItems = append(weightItems, journal.Item{Group: group, Weight: value})
		} else {
			rateItems = append(rateItems, journal.Item{Group: group, Task: task, Starts: value, PeriodMS: periodMS})
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("reading the weights and rate limits: %w", err)
	}
	for _, r := range []struct {
		kind  journal.Kind
		items []journal.Item
	}{{journal.Weight, weightItems}, {journal.Rate, rateItems}} {
		if len(r.items) == 0 {
			continue
		}
		body, err := journal.Encode(r.items)
		if err != nil {
			return 0, 0, err
		}
		if err := journal.AppendFencedIdle(ctx, tx, 0, epoch, ttl, r.kind, body); err != nil {
			return 0, 0, err
		}
	}
	return len(weightItems), len(rateItems), nil
}

// unfinishedOrder is the order in which the unfinished jobs go into the
// journal: oldest first, each after the unfinished jobs it depends on
// (the fold of a job whose dependency it has not seen takes the
// dependency for ended, and the leader then cancels the job when the
// dependency has no record).
func unfinishedOrder(ctx context.Context, tx pgx.Tx) ([]fairway.JobRef, error) {
	rows, err := tx.Query(ctx, convertUnfinishedOrderSQL)
	if err != nil {
		return nil, fmt.Errorf("reading the unfinished jobs: %w", err)
	}
	var all []fairway.JobRef
	deps := map[fairway.JobRef][]string{}
	var ref fairway.JobRef
	var dependsOn []string
	_, err = pgx.ForEachRow(rows, []any{&ref.Group, &ref.ID, &dependsOn}, func() error {
		all = append(all, ref)
		if len(dependsOn) > 0 {
			deps[ref] = slices.Clone(dependsOn)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the unfinished jobs: %w", err)
	}
	unfinished := make(map[fairway.JobRef]bool, len(all))
	for _, r := range all {
		unfinished[r] = true
	}
	out := make([]fairway.JobRef, 0, len(all))
	placed := make(map[fairway.JobRef]bool, len(all))
	// place puts ref after its unfinished dependencies, depth first; a
	// job met again on its own path (a cycle, which submissions cannot
	// make) is placed where it is met.
	var place func(ref fairway.JobRef, path map[fairway.JobRef]bool)
	place = func(ref fairway.JobRef, path map[fairway.JobRef]bool) {
		if placed[ref] || path[ref] {
			return
		}
		path[ref] = true
		for _, d := range deps[ref] {
			if dep := (fairway.JobRef{Group: ref.Group, ID: d}); unfinished[dep] {
				place(dep, path)
			}
		}
		delete(path, ref)
		placed[ref] = true
		out = append(out, ref)
	}
	for _, r := range all {
		place(r, map[fairway.JobRef]bool{})
	}
	return out, nil
}

// unfinishedItems reads the unfinished jobs refs, in that order, as the
// items of a retried row; running is how many an executor held.
func unfinishedItems(ctx context.Context, tx pgx.Tx, refs []fairway.JobRef) (items []journal.Item, running int, err error) {
	groups, ids := make([]string, len(refs)), make([]string, len(refs))
	at := make(map[fairway.JobRef]int, len(refs))
	for i, r := range refs {
		groups[i], ids[i], at[r] = r.Group, r.ID, i
	}
	rows, err := tx.Query(ctx, convertUnfinishedSQL, groups, ids)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the unfinished jobs: %w", err)
	}
	items = make([]journal.Item, len(refs))
	now := time.Now().UnixMicro()
	var it journal.Item
	var args, state string
	var timeoutMS, triggerAfter int64
	read := 0
	_, err = pgx.ForEachRow(rows, []any{&it.Group, &it.ID, &it.Task, &it.Priority, &args, &it.Subject, &it.Submitter, &it.Tracker,
		&it.TraceParent, &timeoutMS, &it.MaxRetries, &it.Attempt, &state, &it.RunAt, &it.ExpiresAt, &it.Waits, &triggerAfter, &it.Submitted}, func() error {
		item := it
		item.Args = []byte(args)
		if timeoutMS > 0 {
			item.Timeout = (time.Duration(timeoutMS) * time.Millisecond).String()
		}
		if len(item.Waits) == 0 {
			item.Waits = nil
		}
		switch fairway.State(state) {
		case fairway.StatePending:
			item.Pending = true
			if triggerAfter != 0 {
				item.Trigger, item.RunAt = true, triggerAfter
			}
		case fairway.StateScheduled, fairway.StateRunning:
			item.RunAt = now // waits again, at once
			running++
		}
		items[at[fairway.JobRef{Group: item.Group, ID: item.ID}]] = item
		read++
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("reading the unfinished jobs: %w", err)
	}
	if read != len(refs) {
		// Every coordinator is stopped, and the transaction reads them
		// all: a job that changed meanwhile was changed by something else.
		return nil, 0, fmt.Errorf("reading the unfinished jobs: %d of %d found; they changed during the move (is a coordinator running?)", read, len(refs))
	}
	return items, running, nil
}
