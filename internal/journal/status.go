package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fairwayhq/fairway"
	"github.com/jackc/pgx/v5"
)

// Status is a partition as an operator sees it (`fairway partitions
// list`): its lease, its unfinished jobs as this coordinator has folded
// them, and how far its events trail its rows.
type Status struct {
	Partition int16
	// Leading says whether this coordinator leads it.
	Leading bool
	// Holder, Epoch and Left are its lease's: the coordinator holding it
	// ("" when none does: never taken, or given up), its fencing epoch,
	// and how long it has left
	// on PostgreSQL's clock (negative: it ran out).
	Holder string
	Epoch  int64
	Left   time.Duration
	// Groups counts the groups with unfinished jobs, and Jobs those jobs
	// by state.
	Groups int
	Jobs   map[fairway.State]int
	// Unpublished counts the rows (batches) whose events the leader has
	// not published yet, and Lag is the age of the oldest of them (0:
	// none).
	Unpublished int64
	Lag         time.Duration
}

// Status returns the partition's status, after a fold of every row
// committed before the call.
func (l *Leader) Status(ctx context.Context) (Status, error) {
	if err := l.lockFolded(ctx); err != nil {
		return Status{}, err
	}
	jobs := map[fairway.State]int{}
	groups := map[string]bool{}
	for k, n := range l.state.Counts {
		if n > 0 {
			jobs[k.State] += n
			groups[k.Group] = true
		}
	}
	l.mu.Unlock()
	st, err := l.LeaseStatus(ctx)
	if err != nil {
		return Status{}, err
	}
	st.Groups, st.Jobs = len(groups), jobs
	return st, nil
}

// LeaseStatus is Status without the jobs and groups (no fold): the
// lease, whether this coordinator leads, and how far the events trail.
func (l *Leader) LeaseStatus(ctx context.Context) (Status, error) {
	st, err := readStatus(ctx, l.db, l.cfg.Partition)
	if err != nil {
		return Status{}, err
	}
	l.mu.RLock()
	st.Partition, st.Leading = l.cfg.Partition, l.leading
	l.mu.RUnlock()
	return st, nil
}

// readStatus reads a partition's lease, then the rows its leader has not
// published the events of: those the published position does not cover
// (an index range of fairway_journal_tail from the position's xmin), or
// every row when none was published yet.
func readStatus(ctx context.Context, q Querier, partition int16) (Status, error) {
	var st Status
	var left, lag float64
	var published *string
	err := q.QueryRow(ctx, `SELECT holder, epoch, extract(epoch FROM until - clock_timestamp())::float8, published::text
  FROM fairway_journal_lease WHERE partition = $1`, partition).Scan(&st.Holder, &st.Epoch, &left, &published)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || (err == nil && published == nil):
		// No leader yet, or none published anything: every row waits.
		err = q.QueryRow(ctx, `SELECT count(*), coalesce(extract(epoch FROM clock_timestamp() - min(at))::float8, 0)
  FROM fairway_journal WHERE partition = $1`, partition).Scan(&st.Unpublished, &lag)
	case err == nil:
		err = q.QueryRow(ctx, `SELECT count(*), coalesce(extract(epoch FROM clock_timestamp() - min(at))::float8, 0)
  FROM fairway_journal
 WHERE partition = $1 AND xid >= pg_snapshot_xmin($2::pg_snapshot) AND NOT pg_visible_in_snapshot(xid, $2::pg_snapshot)`, partition, *published).
			Scan(&st.Unpublished, &lag)
	}
	if err != nil {
		return Status{}, fmt.Errorf("reading the status of journal partition %d: %w", partition, err)
	}
	st.Left, st.Lag = seconds(left), seconds(lag)
	return st, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
