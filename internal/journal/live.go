package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

// fairway_live (migration 023, docs/operations.md "SQL for operators"):
// the unfinished jobs for operators' SQL. The partition's leader keeps
// fairway_live_job, an UNLOGGED table of its state's jobs (no args), up
// to date at most LeaderConfig.LiveEvery behind (a second by default):
// each time, the jobs the fold changed since the last write are upserted
// if unfinished and deleted if they ended, in one transaction that checks
// the leader's epoch under the lease's lock, as appends do (a deposed
// leader writes nothing). A job that comes and ends between two writes
// costs nothing. When it comes to lead, the leader rewrites the table
// whole (what its predecessor left may be a second stale, and an UNLOGGED
// table is empty after a crash or a failover), in chunks, letting go of
// its lock between them.

// liveTable is what the leader tracks for fairway_live_job. Under l.mu.
type liveTable struct {
	// dirty are the jobs changed since the last write, while leading and
	// once the table was rewritten (nil before): true for a job added
	// since, which the table cannot hold yet, so that its end deletes
	// nothing.
	dirty map[fairway.JobRef]bool
}

// note marks the jobs of a fold's changes.
func (t *liveTable) note(c Change) {
	if t.dirty == nil {
		return
	}
	if _, ok := t.dirty[c.Job]; !ok {
		t.dirty[c.Job] = c.From == ""
	}
}

// liveChunk bounds the rows of one statement, and the jobs read under the
// lock at a time by a rewrite.
const liveChunk = 5000

// liveRows are fairway_live_job's rows to write, by column.
type liveRows struct {
	groups, ids, tasks, states, priorities []string
	runAt, expiresAt, scheduled, started   []*time.Time
	attempts, retries, maxRetries, indexes []int32
	dependsOn                              [][]string
	executors, instances                   []*string
	rows                                   []int64
}

func (r *liveRows) len() int { return len(r.ids) }

// add adds job j of ref, with its dependencies as submitted.
func (r *liveRows) add(ref fairway.JobRef, j *Job, deps []string) {
	at := func(us int64) *time.Time {
		if us == 0 {
			return nil
		}
		t := time.UnixMicro(us)
		return &t
	}
	r.groups, r.ids, r.tasks, r.states = append(r.groups, ref.Group), append(r.ids, ref.ID), append(r.tasks, j.Task), append(r.states, string(j.State))
	priority := j.Priority
	if priority == "" {
		priority = string(fairway.PriorityLow)
	}
	r.priorities = append(r.priorities, priority)
	r.runAt, r.expiresAt = append(r.runAt, at(j.RunAt)), append(r.expiresAt, at(j.ExpiresAt))
	r.attempts, r.retries, r.maxRetries = append(r.attempts, j.Attempt), append(r.retries, j.Retries), append(r.maxRetries, j.MaxRetries)
	r.dependsOn = append(r.dependsOn, deps)
	var executor, instance *string
	var scheduled, started *time.Time
	if h := j.Holder; h != nil {
		e, in := h.Executor, h.Instance
		executor, instance, scheduled, started = &e, &in, at(h.Scheduled), at(h.Started)
	}
	r.executors, r.instances, r.scheduled, r.started = append(r.executors, executor), append(r.instances, instance), append(r.scheduled, scheduled), append(r.started, started)
	r.rows, r.indexes = append(r.rows, j.Row), append(r.indexes, j.Index)
}

// liveWriteSQL is the statement liveRows are written with: the row
// arrays, and the depends_on lists as JSON arrays (PostgreSQL has no
// arrays of arrays of unequal lengths).
const liveWriteSQL = `INSERT INTO fairway_live_job AS l (group_name, id, task, state, priority, run_at, expires_at, attempt, retries, max_retries,
    depends_on, worker, worker_instance, scheduled_at, started, journal_row, journal_index, updated)
SELECT r.group_name, r.id, r.task, r.state, r.priority, r.run_at, r.expires_at, r.attempt, r.retries, r.max_retries,
       CASE WHEN r.deps IS NULL THEN NULL ELSE ARRAY(SELECT jsonb_array_elements_text(r.deps)) END,
       r.worker, r.instance, r.scheduled, r.started, r.jrow, r.jindex, now()
  FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[], $9::timestamptz[], $10::int[], $11::int[], $12::int[],
              $13::jsonb[], $14::text[], $15::text[], $16::timestamptz[], $17::timestamptz[], $18::bigint[], $19::int[])
       r (group_name, id, task, state, priority, run_at, expires_at, attempt, retries, max_retries, deps, worker, instance, scheduled, started, jrow, jindex)
 WHERE EXISTS (SELECT 1 FROM fairway_journal_lease WHERE partition = $1 AND epoch = $2)
ON CONFLICT (group_name, id) DO UPDATE SET task = excluded.task, state = excluded.state, priority = excluded.priority,
    run_at = excluded.run_at, expires_at = excluded.expires_at, attempt = excluded.attempt, retries = excluded.retries,
    max_retries = excluded.max_retries, depends_on = excluded.depends_on, worker = excluded.worker,
    worker_instance = excluded.worker_instance, scheduled_at = excluded.scheduled_at, started = excluded.started,
    journal_row = excluded.journal_row, journal_index = excluded.journal_index, updated = excluded.updated`

// liveDeleteSQL deletes the jobs ($3, $4) that ended, if the partition's
// epoch is still $2.
const liveDeleteSQL = `DELETE FROM fairway_live_job l USING unnest($3::text[], $4::text[]) d (group_name, id)
 WHERE l.group_name = d.group_name AND l.id = d.id
   AND EXISTS (SELECT 1 FROM fairway_journal_lease WHERE partition = $1 AND epoch = $2)`

// args are the statement's arguments after the partition and the epoch.
func (r *liveRows) args() []any {
	deps := make([]*string, len(r.dependsOn))
	for i, d := range r.dependsOn {
		if len(d) > 0 {
			s := jsonStrings(d)
			deps[i] = &s
		}
	}
	return []any{r.groups, r.ids, r.tasks, r.states, r.priorities, r.runAt, r.expiresAt, r.attempts, r.retries, r.maxRetries,
		deps, r.executors, r.instances, r.scheduled, r.started, r.rows, r.indexes}
}

// jsonStrings is ids as a JSON array.
func jsonStrings(ids []string) string {
	b := []byte{'['}
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%q", id)
	}
	return string(append(b, ']'))
}

// runLive keeps fairway_live_job while leading, every LiveEvery, until
// ctx ends.
func (l *Leader) runLive(ctx context.Context) {
	tick := time.NewTicker(l.cfg.LiveEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := l.writeLive(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, ErrFenced) {
			l.cfg.Logger.Warn("writing fairway_live_job", "partition", l.cfg.Partition, "error", err)
		}
	}
}

// writeLive writes what changed since the last write, or the whole table
// after coming to lead.
func (l *Leader) writeLive(ctx context.Context) error {
	l.mu.Lock()
	if !l.leading || l.state == nil {
		l.live.dirty = nil
		l.mu.Unlock()
		return nil
	}
	epoch := l.lease.Epoch
	if l.live.dirty == nil {
		// Changes from now on are tracked; the rewrite reads the jobs
		// as they are when it reaches them.
		l.live.dirty = map[fairway.JobRef]bool{}
		refs := make([]fairway.JobRef, 0, len(l.state.Jobs))
		for ref := range l.state.Jobs {
			refs = append(refs, ref)
		}
		l.mu.Unlock()
		if err := l.rewriteLive(ctx, epoch, refs); err != nil {
			l.mu.Lock()
			l.live.dirty = nil // the next write starts again
			l.mu.Unlock()
			return err
		}
		return nil
	}
	var upsert liveRows
	var ended liveRows
	dirty := l.live.dirty
	l.live.dirty = make(map[fairway.JobRef]bool, len(dirty))
	for ref, added := range dirty {
		if j := l.state.Jobs[ref]; j != nil {
			upsert.add(ref, j, l.state.DependsOn[ref.Group][ref.ID])
		} else if !added {
			ended.groups, ended.ids = append(ended.groups, ref.Group), append(ended.ids, ref.ID)
		}
	}
	l.mu.Unlock()
	if upsert.len() == 0 && ended.len() == 0 {
		return nil
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SELECT pg_advisory_xact_lock_shared($1, $2)", leaseLockClass, int32(l.cfg.Partition))
	if upsert.len() > 0 {
		b.Queue(liveWriteSQL, append([]any{l.cfg.Partition, epoch}, upsert.args()...)...)
	}
	if ended.len() > 0 {
		b.Queue(liveDeleteSQL, l.cfg.Partition, epoch, ended.groups, ended.ids)
	}
	b.Queue("COMMIT")
	if err := l.db.SendBatch(ctx, b).Close(); err != nil {
		// Written or not: each may be in the table now.
		l.mu.Lock()
		if l.live.dirty != nil {
			for ref := range dirty {
				l.live.dirty[ref] = false
			}
		}
		l.mu.Unlock()
		return fmt.Errorf("writing %d jobs and deleting %d: %w", upsert.len(), ended.len(), err)
	}
	return nil
}

// rewriteLive writes fairway_live_job anew with the jobs refs (those
// still unfinished when read), in one transaction.
func (l *Leader) rewriteLive(ctx context.Context, epoch int64, refs []fairway.JobRef) error {
	begin, ok := l.db.(interface {
		Begin(context.Context) (pgx.Tx, error)
	})
	if !ok {
		return errors.New("rewriting fairway_live_job: the journal's database handle opens no transaction")
	}
	tx, err := begin.Begin(ctx)
	if err != nil {
		return fmt.Errorf("rewriting fairway_live_job: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	b := &pgx.Batch{}
	// A leader frozen in the middle loses the transaction (and holds no
	// takeover back) past the lease's TTL.
	b.Queue("SELECT set_config('idle_in_transaction_session_timeout', $1, true)", fmt.Sprint(l.cfg.TTL.Milliseconds()))
	b.Queue("SELECT pg_advisory_xact_lock_shared($1, $2)", leaseLockClass, int32(l.cfg.Partition))
	var leads bool
	b.Queue("SELECT EXISTS (SELECT 1 FROM fairway_journal_lease WHERE partition = $1 AND epoch = $2)", l.cfg.Partition, epoch).QueryRow(func(r pgx.Row) error { return r.Scan(&leads) })
	b.Queue("TRUNCATE fairway_live_job")
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("rewriting fairway_live_job: %w", err)
	}
	if !leads {
		return ErrFenced
	}
	written := 0
	for start := 0; start < len(refs); start += liveChunk {
		var rows liveRows
		l.mu.RLock()
		for _, ref := range refs[start:min(start+liveChunk, len(refs))] {
			if j := l.state.Jobs[ref]; j != nil {
				rows.add(ref, j, l.state.DependsOn[ref.Group][ref.ID])
			}
		}
		l.mu.RUnlock()
		if rows.len() == 0 {
			continue
		}
		if _, err := tx.Exec(ctx, liveWriteSQL, append([]any{l.cfg.Partition, epoch}, rows.args()...)...); err != nil {
			return fmt.Errorf("rewriting fairway_live_job: %w", err)
		}
		written += rows.len()
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("rewriting fairway_live_job: %w", err)
	}
	l.cfg.Logger.Debug("rewrote fairway_live_job", "partition", l.cfg.Partition, "jobs", written)
	return nil
}
