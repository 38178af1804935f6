package journal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// The journal's retention (docs/journal.md, "Retention"). Every snapshot
// leaves a mark (fairway_journal_mark: the tail position it covers, and
// when). While it leads, the leader deletes, every PruneEvery, the rows
// visible in the newest mark older than JournalAge, but the submitted
// rows that carry an unfinished job's arguments (State.Rows). Those rows
// committed more than JournalAge ago, so:
//   - every snapshot since covers them, and a coordinator that restores
//     from the last one replays none of them;
//   - a coordinator that read the journal within JournalAge has folded
//     them; one whose last read is older than half of it (cut off from
//     PostgreSQL, frozen) restores from the last snapshot instead of
//     reading on (Leader.catchUp);
//   - their events were published (a snapshot covers no row whose events
//     are not).
// Rows are deleted a batch at a time; the marks older than the one used
// go with them.

// pruneBatch bounds the rows one statement deletes.
const pruneBatch = 10_000

// pruneSQL deletes up to $5 rows of partition $1 visible in the newest
// mark older than $3, but the rows $4, if the epoch $2 is still the
// partition's; it returns the rows deleted.
const pruneSQL = `WITH mark AS (
    SELECT tail FROM fairway_journal_mark WHERE partition = $1 AND taken < now() - $3::interval ORDER BY taken DESC LIMIT 1
), doomed AS (
    SELECT j.id FROM fairway_journal j, mark
     WHERE j.partition = $1 AND j.xid < pg_snapshot_xmax(mark.tail) AND pg_visible_in_snapshot(j.xid, mark.tail)
       AND j.id <> ALL ($4::bigint[])
       AND EXISTS (SELECT 1 FROM fairway_journal_lease l WHERE l.partition = $1 AND l.epoch = $2)
     ORDER BY j.xid, j.id LIMIT $5
)
DELETE FROM fairway_journal j USING doomed WHERE j.id = doomed.id`

// pruneMarksSQL deletes the marks of partition $1 older than the newest
// one older than $2: the prune used that one, the next uses it or a newer.
const pruneMarksSQL = `DELETE FROM fairway_journal_mark m
 WHERE m.partition = $1
   AND m.taken < (SELECT max(taken) FROM fairway_journal_mark WHERE partition = $1 AND taken < now() - $2::interval)`

// PruneJournal deletes the rows the journal's retention lets go (see
// above), while leading, and returns how many. ErrNotLeading when this
// coordinator does not lead.
func (l *Leader) PruneJournal(ctx context.Context) (int64, error) {
	l.mu.RLock()
	leading, epoch, restored := l.leading, l.lease.Epoch, l.state != nil
	var keep []int64
	if restored {
		keep = slices.Collect(maps.Keys(l.state.Rows))
	}
	l.mu.RUnlock()
	switch {
	case !leading:
		return 0, ErrNotLeading
	case !restored:
		return 0, nil // it does not know yet which rows its jobs need
	case !l.Reachable():
		return 0, ErrUnreachable
	}
	age := fmt.Sprintf("%d milliseconds", l.cfg.JournalAge.Milliseconds())
	var deleted int64
	for {
		tag, err := l.db.Exec(ctx, pruneSQL, l.cfg.Partition, epoch, age, keep, pruneBatch)
		if err != nil {
			return deleted, fmt.Errorf("deleting journal rows of partition %d: %w", l.cfg.Partition, err)
		}
		deleted += tag.RowsAffected()
		if tag.RowsAffected() < pruneBatch {
			break
		}
	}
	if _, err := l.db.Exec(ctx, pruneMarksSQL, l.cfg.Partition, age); err != nil {
		return deleted, fmt.Errorf("deleting journal marks of partition %d: %w", l.cfg.Partition, err)
	}
	return deleted, nil
}

// prune prunes the journal while leading (every PruneEvery: Run), and
// logs what it did.
func (l *Leader) prune(ctx context.Context) {
	began := time.Now()
	n, err := l.PruneJournal(ctx)
	switch {
	case errors.Is(err, ErrNotLeading) || errors.Is(err, ErrUnreachable) || ctx.Err() != nil:
	case err != nil:
		l.cfg.Logger.Warn("pruning the journal", "error", err)
	case n > 0:
		l.cfg.Logger.Info("pruned the journal", "rows", n, "older than", l.cfg.JournalAge.String(), "in", time.Since(began).String())
	}
}
