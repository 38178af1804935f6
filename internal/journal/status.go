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
	st := Status{Partition: l.cfg.Partition, Leading: l.leading, Jobs: map[fairway.State]int{}}
	groups := map[string]bool{}
	for k, n := range l.state.Counts {
		if n > 0 {
			st.Jobs[k.State] += n
			groups[k.Group] = true
		}
	}
	l.mu.Unlock()
	st.Groups = len(groups)
	lease, err := readStatus(ctx, l.db, l.cfg.Partition)
	if err != nil {
		return Status{}, err
	}
	st.Holder, st.Epoch, st.Left, st.Unpublished, st.Lag = lease.Holder, lease.Epoch, lease.Left, lease.Unpublished, lease.Lag
	return st, nil
}

// statusSQL reads a partition's lease and the rows its leader has not
// published the events of (those the published position does not cover;
// every row before it has, when none was published yet), oldest first.
const statusSQL = `
SELECT l.holder, l.epoch, extract(epoch FROM l.until - clock_timestamp())::float8,
       u.n, coalesce(extract(epoch FROM clock_timestamp() - u.oldest)::float8, 0)
  FROM fairway_journal_lease l,
       LATERAL (SELECT count(*) AS n, min(j.at) AS oldest
                  FROM fairway_journal j
                 WHERE j.partition = l.partition
                   AND (l.published IS NULL
                        OR (j.xid >= pg_snapshot_xmin(l.published) AND NOT pg_visible_in_snapshot(j.xid, l.published)))) u
 WHERE l.partition = $1`

func readStatus(ctx context.Context, q Querier, partition int16) (Status, error) {
	var st Status
	var left, lag float64
	err := q.QueryRow(ctx, statusSQL, partition).Scan(&st.Holder, &st.Epoch, &left, &st.Unpublished, &lag)
	if errors.Is(err, pgx.ErrNoRows) {
		// No coordinator ever led it: every row waits for one.
		err = q.QueryRow(ctx, `SELECT count(*), coalesce(extract(epoch FROM clock_timestamp() - min(at))::float8, 0) FROM fairway_journal WHERE partition = $1`, partition).
			Scan(&st.Unpublished, &lag)
	}
	if err != nil {
		return Status{}, fmt.Errorf("reading the status of journal partition %d: %w", partition, err)
	}
	st.Left, st.Lag = seconds(left), seconds(lag)
	return st, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
