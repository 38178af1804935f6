package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// fairway_live (migration 023, docs/operations.md "SQL for operators"):
// the unfinished jobs for operators' SQL. On the journal they are the
// partition leader's state's, which no table on the hot path holds: a
// read of the view (the function fairway_live()) holds the advisory lock
// ('LIVE', partition) shared and waits until the leader has written
// fairway_live_job as of after the read began (fairway_live_state says
// when). The leader looks for such a reader every LeaderConfig.LivePoll
// (100 ms), folds what was committed before, and writes the jobs the
// fold changed since its last write (inserted, updated, or deleted once
// ended: a job that came and ended between two writes costs nothing), or
// the whole table when it has no such list (it came to lead, or the list
// outgrew liveDirtyMax). Every write checks the leader's epoch under the
// lease's lock, as appends do: a deposed leader writes nothing. A cluster
// that nobody queries pays a look at pg_locks every LivePoll.

// liveLockClass is the first key of the advisory lock a reader of
// fairway_live holds (the second is the partition): "LIVE".
const liveLockClass = 0x4c495645

// liveDirtyMax bounds the jobs the leader lists as changed since its last
// write: past it, the next write rewrites the table (a million changes
// cost less rewritten than listed).
const liveDirtyMax = 200_000

// liveTable is what the leader tracks for fairway_live_job. Under l.mu.
type liveTable struct {
	// dirty are the jobs changed since the last write, while leading and
	// once the table was rewritten (nil before), each with what the table
	// holds of it.
	dirty map[fairway.JobRef]liveMark
}

// liveMark says what fairway_live_job holds of a job changed since the
// last write.
type liveMark uint8

const (
	// liveAdded: a job added since, which the table does not hold: an
	// insert if it is unfinished, nothing if it ended.
	liveAdded liveMark = iota + 1
	// liveWritten: the table holds it: an update, or a delete once it
	// ended.
	liveWritten
	// liveUnsure: a write that failed may have written it: an insert or
	// an update, or a delete.
	liveUnsure
)

// note marks the jobs of a fold's changes.
func (t *liveTable) note(c Change) {
	if t.dirty == nil {
		return
	}
	if _, ok := t.dirty[c.Job]; !ok {
		if len(t.dirty) >= liveDirtyMax {
			t.dirty = nil // rewritten at the next write
			return
		}
		t.dirty[c.Job] = liveWritten
		if c.From == "" {
			t.dirty[c.Job] = liveAdded
		}
	}
}

// liveChunk bounds the jobs a rewrite reads under the lock at a time.
const liveChunk = 5000

// liveRows are fairway_live_job's rows to write, by column.
type liveRows struct {
	groups, ids, tasks, states, priorities []string
	runAt, expiresAt, scheduled, started   []pgtype.Timestamptz
	attempts, retries, maxRetries, indexes []int32
	dependsOn                              [][]string
	executors, instances                   []pgtype.Text
	rows                                   []int64
	// next is the row CopyFrom reads next, plus one (pgx.CopyFromSource).
	next int
}

func (r *liveRows) len() int { return len(r.ids) }

// reset empties r, keeping its arrays.
func (r *liveRows) reset() {
	r.groups, r.ids, r.tasks, r.states, r.priorities = r.groups[:0], r.ids[:0], r.tasks[:0], r.states[:0], r.priorities[:0]
	r.runAt, r.expiresAt, r.scheduled, r.started = r.runAt[:0], r.expiresAt[:0], r.scheduled[:0], r.started[:0]
	r.attempts, r.retries, r.maxRetries, r.indexes = r.attempts[:0], r.retries[:0], r.maxRetries[:0], r.indexes[:0]
	r.dependsOn, r.executors, r.instances, r.rows, r.next = r.dependsOn[:0], r.executors[:0], r.instances[:0], r.rows[:0], 0
}

// add adds job j of ref, with its dependencies as submitted.
func (r *liveRows) add(ref fairway.JobRef, j *Job, deps []string) {
	at := func(us int64) pgtype.Timestamptz {
		if us == 0 {
			return pgtype.Timestamptz{}
		}
		return pgtype.Timestamptz{Time: time.UnixMicro(us), Valid: true}
	}
	r.groups, r.ids, r.tasks, r.states = append(r.groups, ref.Group), append(r.ids, ref.ID), append(r.tasks, j.Task), append(r.states, string(j.State()))
	priority := j.Priority()
	if priority == "" {
		priority = string(fairway.PriorityLow)
	}
	r.priorities = append(r.priorities, priority)
	r.runAt, r.expiresAt = append(r.runAt, at(j.RunAt)), append(r.expiresAt, at(j.ExpiresAt()))
	r.attempts, r.retries, r.maxRetries = append(r.attempts, j.Attempt), append(r.retries, int32(j.Retries)), append(r.maxRetries, int32(j.MaxRetries))
	r.dependsOn = append(r.dependsOn, deps)
	var executor, instance pgtype.Text
	var scheduled, started pgtype.Timestamptz
	if h := j.Holder; h != nil {
		executor, instance = pgtype.Text{String: h.Executor, Valid: true}, pgtype.Text{String: h.Instance, Valid: true}
		scheduled, started = at(h.Scheduled), at(h.Started)
	}
	r.executors, r.instances, r.scheduled, r.started = append(r.executors, executor), append(r.instances, instance), append(r.scheduled, scheduled), append(r.started, started)
	r.rows, r.indexes = append(r.rows, j.Row()), append(r.indexes, j.Index())
}

// liveColumns are the columns an insert of liveRows writes (CopyFrom).
var liveColumns = []string{"group_name", "id", "task", "state", "priority", "run_at", "expires_at", "attempt", "retries", "max_retries",
	"depends_on", "worker", "worker_instance", "scheduled_at", "started", "journal_row", "journal_index"}

// Next, Values and Err read the rows in order: a pgx.CopyFromSource.
func (r *liveRows) Next() bool { r.next++; return r.next <= r.len() }

func (r *liveRows) Values() ([]any, error) {
	i := r.next - 1
	var deps any
	if len(r.dependsOn[i]) > 0 {
		deps = r.dependsOn[i]
	}
	return []any{r.groups[i], r.ids[i], r.tasks[i], r.states[i], r.priorities[i], r.runAt[i], r.expiresAt[i], r.attempts[i], r.retries[i], r.maxRetries[i],
		deps, r.executors[i], r.instances[i], r.scheduled[i], r.started[i], r.rows[i], r.indexes[i]}, nil
}

func (r *liveRows) Err() error { return nil }

// liveUpdateSQL updates what a job's changes may change.
const liveUpdateSQL = `UPDATE fairway_live_job l
   SET state = u.state, priority = u.priority, run_at = u.run_at, attempt = u.attempt, retries = u.retries, worker = u.worker,
       worker_instance = u.instance, scheduled_at = u.scheduled, started = u.started
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::int[], $7::int[], $8::text[], $9::text[],
              $10::timestamptz[], $11::timestamptz[])
       u (group_name, id, state, priority, run_at, attempt, retries, worker, instance, scheduled, started)
 WHERE l.group_name = u.group_name AND l.id = u.id`

// liveDeleteSQL deletes the jobs that ended.
const liveDeleteSQL = `DELETE FROM fairway_live_job l USING unnest($1::text[], $2::text[]) d (group_name, id)
 WHERE l.group_name = d.group_name AND l.id = d.id`

// answerLive writes fairway_live_job when a reader waits for it, while
// leading (every LivePoll: Run).
func (l *Leader) answerLive(ctx context.Context) {
	if !l.Reachable() {
		return // at the next poll after a probe found the database back
	}
	l.mu.RLock()
	leading := l.leading
	l.mu.RUnlock()
	if !leading {
		return
	}
	var asked bool
	err := l.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
 WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 2)`, liveLockClass, int32(l.cfg.Partition)).Scan(&asked)
	if err == nil && asked {
		err = l.writeLive(ctx)
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotLeading) {
		l.cfg.Logger.Warn("writing fairway_live_job", "error", err)
	}
}

// writeLive writes what changed since the last write, or the whole table
// when it has no list of the changes, as of every row committed before
// the call, and says so in fairway_live_state.
func (l *Leader) writeLive(ctx context.Context) error {
	if err := l.lockFolded(ctx); err != nil {
		return err
	}
	if !l.leading {
		l.live.dirty = nil
		l.mu.Unlock()
		return ErrNotLeading
	}
	epoch := l.lease.Epoch
	if l.live.dirty == nil {
		// Changes from now on are listed; the rewrite reads the jobs
		// as they are when it reaches them (as of this fold, or later).
		l.live.dirty = map[fairway.JobRef]liveMark{}
		refs := make([]fairway.JobRef, 0, l.state.Jobs.Len())
		for ref := range l.state.Jobs.All() {
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
	var inserts, updates, upserts, deletes liveRows
	dirty := l.live.dirty
	l.live.dirty = make(map[fairway.JobRef]liveMark, len(dirty))
	for ref, mark := range dirty {
		j := l.state.Jobs.Get(ref)
		deps := l.state.DependsOn[ref.Group][ref.ID]
		switch {
		case j != nil && mark == liveAdded:
			inserts.add(ref, j, deps)
		case j != nil && mark == liveWritten:
			updates.add(ref, j, deps)
		case j != nil:
			upserts.add(ref, j, deps)
		case mark != liveAdded:
			deletes.groups, deletes.ids = append(deletes.groups, ref.Group), append(deletes.ids, ref.ID)
		}
	}
	l.mu.Unlock()
	err := l.inLiveTx(ctx, epoch, func(tx pgx.Tx) error {
		// The unsure first: deleted, then inserted with the new ones.
		b := &pgx.Batch{}
		if upserts.len() > 0 {
			b.Queue(liveDeleteSQL, upserts.groups, upserts.ids)
		}
		if deletes.len() > 0 {
			b.Queue(liveDeleteSQL, deletes.groups, deletes.ids)
		}
		if updates.len() > 0 {
			u := &updates
			b.Queue(liveUpdateSQL, u.groups, u.ids, u.states, u.priorities, u.runAt, u.attempts, u.retries, u.executors, u.instances, u.scheduled, u.started)
		}
		b.Queue(liveWrittenSQL, l.cfg.Partition)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		for _, rows := range []*liveRows{&upserts, &inserts} {
			if rows.len() == 0 {
				continue
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"fairway_live_job"}, liveColumns, rows); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrFenced) {
		// Written or not: each may be in the table now.
		l.mu.Lock()
		if l.live.dirty != nil {
			for ref := range dirty {
				l.live.dirty[ref] = liveUnsure
			}
		}
		l.mu.Unlock()
		return fmt.Errorf("writing fairway_live_job (%d new jobs, %d changed, %d ended): %w", inserts.len()+upserts.len(), updates.len(), deletes.len(), err)
	}
	return err
}

// liveWrittenSQL says when the partition's ($1) jobs were written:
// now(), the start of a transaction that began after the leader saw the
// reader, and folded what was committed before.
const liveWrittenSQL = `INSERT INTO fairway_live_state (partition, written) VALUES ($1, now())
ON CONFLICT (partition) DO UPDATE SET written = excluded.written`

// inLiveTx runs write in a transaction that holds the lease's lock
// shared and has checked that epoch is the partition's (as the leader's
// appends do): a deposed leader writes nothing (ErrFenced), and a
// takeover waits for a write in progress. A leader frozen in the middle
// loses the transaction past the lease's TTL, and holds no takeover back
// longer.
func (l *Leader) inLiveTx(ctx context.Context, epoch int64, write func(pgx.Tx) error) error {
	begin, ok := l.db.(interface {
		Begin(context.Context) (pgx.Tx, error)
	})
	if !ok {
		return errors.New("the journal's database handle opens no transaction")
	}
	tx, err := begin.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	b := &pgx.Batch{}
	b.Queue("SELECT set_config('idle_in_transaction_session_timeout', $1, true)", fmt.Sprint(l.cfg.TTL.Milliseconds()))
	b.Queue("SELECT pg_advisory_xact_lock_shared($1, $2)", leaseLockClass, int32(l.cfg.Partition))
	var leads bool
	b.Queue("SELECT EXISTS (SELECT 1 FROM fairway_journal_lease WHERE partition = $1 AND epoch = $2)", l.cfg.Partition, epoch).
		QueryRow(func(r pgx.Row) error { return r.Scan(&leads) })
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if !leads {
		return ErrFenced
	}
	if err := write(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// liveDeletePartitionSQL deletes a partition's rows of fairway_live_job
// (those whose submitted row is in its journal), and those whose row is
// gone: no leader writes them again.
const liveDeletePartitionSQL = `DELETE FROM fairway_live_job l
 WHERE NOT EXISTS (SELECT 1 FROM fairway_journal r WHERE r.id = l.journal_row AND r.partition <> $1)`

// rewriteLive writes fairway_live_job anew with the jobs refs (those
// still unfinished when read), in one transaction, a chunk of jobs read
// under the lock at a time.
func (l *Leader) rewriteLive(ctx context.Context, epoch int64, refs []fairway.JobRef) error {
	written := 0
	err := l.inLiveTx(ctx, epoch, func(tx pgx.Tx) error {
		// Emptied, and without the primary key while it copies: built at
		// the end from sorted rows, it costs a fraction of an entry
		// inserted per row. A database shared with other partitions keeps
		// their rows, and the key.
		shared := l.cfg.Shared
		if shared {
			if _, err := tx.Exec(ctx, liveDeletePartitionSQL, l.cfg.Partition); err != nil {
				return err
			}
		} else {
			if _, err := tx.Exec(ctx, "TRUNCATE fairway_live_job"); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "ALTER TABLE fairway_live_job DROP CONSTRAINT fairway_live_job_pkey"); err != nil {
				return err
			}
		}
		var rows liveRows
		for start := 0; start < len(refs); start += liveChunk {
			rows.reset()
			l.mu.RLock()
			for _, ref := range refs[start:min(start+liveChunk, len(refs))] {
				if j := l.state.Jobs.Get(ref); j != nil {
					rows.add(ref, j, l.state.DependsOn[ref.Group][ref.ID])
				}
			}
			l.mu.RUnlock()
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"fairway_live_job"}, liveColumns, &rows); err != nil {
				return err
			}
			written += rows.len()
		}
		if !shared {
			if _, err := tx.Exec(ctx, "ALTER TABLE fairway_live_job ADD PRIMARY KEY (group_name, id)"); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, liveWrittenSQL, l.cfg.Partition)
		return err
	})
	if err != nil {
		return fmt.Errorf("rewriting fairway_live_job: %w", err)
	}
	l.cfg.Logger.Debug("rewrote fairway_live_job", "jobs", written)
	return nil
}
